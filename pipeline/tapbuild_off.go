//go:build notap

package pipeline

// tapBuilt is false in a build with -tags notap: the taps' checks are
// compiled out and ArmTap refuses (tapbuild.go says why).
const tapBuilt = false

//go:build noimpair

package pipeline

// impairBuilt is false in a build with -tags noimpair: the impair stage's
// checks are compiled out (impairbuild.go says why).
const impairBuilt = false

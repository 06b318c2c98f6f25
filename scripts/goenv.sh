# The Go and the build settings roce-fwd is built with, sourced (by bash)
# by the Makefile, the Dockerfile and the scripts that build it: go.mod's
# toolchain line, x86-64-v3, and Go's SIMD experiment when the Go in use
# knows it (Go 1.25 rejects it). Each can be set in the environment
# instead (GOEXPERIMENT= for none).
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto} GOAMD64=${GOAMD64-v3}
if [ -z "${GOEXPERIMENT+set}" ]; then
	GOEXPERIMENT=
	# In the module, where the go command picks go.mod's toolchain.
	if (cd "$(dirname "${BASH_SOURCE[0]}")/.." && GOEXPERIMENT=simd go env GOEXPERIMENT) >/dev/null 2>&1; then
		GOEXPERIMENT=simd
	fi
fi
export GOEXPERIMENT

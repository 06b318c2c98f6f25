//go:build !noimpair

package pipeline

// impairBuilt says the impair stage is compiled in. `make bench` builds
// roce-fwd once more with -tags noimpair, which leaves the stage's
// per-burst check out, to show what that check costs when no rule is set.
const impairBuilt = true

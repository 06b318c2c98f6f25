package roce

// ClassifyGeneral is Classify without its fast path, so tests can check
// that the two agree.
func ClassifyGeneral(frame []byte, m *TCMap, verifyICRC bool, out *Result) {
	classifyGeneral(frame, m, verifyICRC, out)
}

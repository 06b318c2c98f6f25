#include "textflag.h"

// func lines(p *uintptr, n int)
TEXT ·lines(SB), NOSPLIT|NOFRAME, $0-16
	MOVD p+0(FP), R0
	MOVD n+8(FP), R1
loop:
	MOVD.P 8(R0), R2
	PRFM (R2), PLDL1KEEP
	SUBS $1, R1, R1
	BNE loop
	RET

// func forWrite(p *byte, n int)
TEXT ·forWrite(SB), NOSPLIT|NOFRAME, $0-16
	MOVD p+0(FP), R0
	MOVD n+8(FP), R1
	ADD R0, R1, R2
	SUB $1, R2, R2 // the last byte
	AND $~63, R0, R0
wloop:
	PRFM (R0), PSTL1KEEP
	ADD $64, R0, R0
	CMP R2, R0
	BLS wloop
	RET

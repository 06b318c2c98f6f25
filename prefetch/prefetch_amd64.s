#include "textflag.h"

// func lines(p *uintptr, n int)
TEXT ·lines(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
loop:
	MOVQ (SI), AX
	PREFETCHT0 (AX)
	ADDQ $8, SI
	DECQ CX
	JNZ loop
	RET

// func forWrite(p *byte, n int)
TEXT ·forWrite(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	LEAQ -1(AX)(CX*1), DX // the last byte
	ANDQ $~63, AX
wloop:
	// PREFETCHW (AX), which the Go assembler does not name: 0F 0D /1.
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	ADDQ $64, AX
	CMPQ AX, DX
	JLS wloop
	RET

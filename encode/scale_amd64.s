//go:build amd64 && !noasm

#include "textflag.h"

// The exponent bits of a float32: where all are set the element is NaN or
// ±Inf and keeps its bits (scaleElem in scaled.go).
DATA expbits32<>+0(SB)/4, $0x7f800000
GLOBL expbits32<>(SB), RODATA|NOPTR, $4

// func scale32AVX2(dst, ref *byte, n int, f float32)
// dst[i] = ref[i] * f in float32 for the n elements of ref (a positive
// multiple of 8), NaN and ±Inf copied: scaleRef's loop, eight at a time.
// VMULPS rounds as MULSS does, so the bits are the portable loop's.
TEXT ·scale32AVX2(SB), NOSPLIT, $0-28
	MOVQ         dst+0(FP), DI
	MOVQ         ref+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS f+24(FP), Y15
	VPBROADCASTD expbits32<>(SB), Y14

s32loop:
	VMOVDQU   (SI), Y0
	VMULPS    Y15, Y0, Y1
	VPAND     Y14, Y0, Y2
	VPCMPEQD  Y14, Y2, Y2
	VPBLENDVB Y2, Y0, Y1, Y1
	VMOVDQU   Y1, (DI)
	ADDQ      $32, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JNZ       s32loop
	VZEROUPPER
	RET

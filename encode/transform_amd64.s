//go:build amd64 && !noasm

#include "textflag.h"
#include "transform_amd64.h"

// AVX2 kernels of the planes transforms for t = 0 (no dropped low bits):
// the same arithmetic as transform32.go and transform16.go, 32 elements per
// iteration. Each function takes n, a positive multiple of 32 elements, and
// the plane stride (the distance between planes in the plane buffer).
//
// 32-bit byte transposition (split): VPSHUFB gathers byte j of the four
// elements of each 128-bit lane into dword j of that lane; VPERMD
// [0 4 1 5 2 6 3 7] makes qword j hold byte j of all eight elements; a 4x4
// qword transpose of four such registers (VPUNPCK{L,H}QDQ, VPERM2I128)
// gives 32 bytes of each plane. join runs the same steps backwards.
// 16-bit: VPSHUFB puts each lane's low bytes in its low qword, VPERMQ
// [0 2 1 3] gathers the low qwords in the low lane, VPERM2I128 pairs lanes.

DATA shuf32<>+0(SB)/8, $0x0d0905010c080400
DATA shuf32<>+8(SB)/8, $0x0f0b07030e0a0602
DATA shuf32<>+16(SB)/8, $0x0d0905010c080400
DATA shuf32<>+24(SB)/8, $0x0f0b07030e0a0602
GLOBL shuf32<>(SB), RODATA|NOPTR, $32

DATA perm32<>+0(SB)/8, $0x0000000400000000
DATA perm32<>+8(SB)/8, $0x0000000500000001
DATA perm32<>+16(SB)/8, $0x0000000600000002
DATA perm32<>+24(SB)/8, $0x0000000700000003
GLOBL perm32<>(SB), RODATA|NOPTR, $32

DATA unperm32<>+0(SB)/8, $0x0000000200000000
DATA unperm32<>+8(SB)/8, $0x0000000600000004
DATA unperm32<>+16(SB)/8, $0x0000000300000001
DATA unperm32<>+24(SB)/8, $0x0000000700000005
GLOBL unperm32<>(SB), RODATA|NOPTR, $32

DATA shuf16<>+0(SB)/8, $0x0e0c0a0806040200
DATA shuf16<>+8(SB)/8, $0x0f0d0b0907050301
DATA shuf16<>+16(SB)/8, $0x0e0c0a0806040200
DATA shuf16<>+24(SB)/8, $0x0f0d0b0907050301
GLOBL shuf16<>(SB), RODATA|NOPTR, $32

DATA unshuf16<>+0(SB)/8, $0x0b030a0209010800
DATA unshuf16<>+8(SB)/8, $0x0f070e060d050c04
DATA unshuf16<>+16(SB)/8, $0x0b030a0209010800
DATA unshuf16<>+24(SB)/8, $0x0f070e060d050c04
GLOBL unshuf16<>(SB), RODATA|NOPTR, $32

// mode: 0 baseline (rotate), 1 xor, 2 sub, 3 none (transposition only).

// Y15: all ones, Y14: the sign bit of every lane, Y13: byte shuffle,
// Y12: dword permutation (32-bit only).

// Split transposition of Y0..Y3 (32 elements) into 32 bytes per plane,
// stored at DI, R8, R9, R10.
#define SPLIT32_STORE \
	VPSHUFB     Y13, Y0, Y0; \
	VPSHUFB     Y13, Y1, Y1; \
	VPSHUFB     Y13, Y2, Y2; \
	VPSHUFB     Y13, Y3, Y3; \
	VPERMD      Y0, Y12, Y0; \
	VPERMD      Y1, Y12, Y1; \
	VPERMD      Y2, Y12, Y2; \
	VPERMD      Y3, Y12, Y3; \
	VPUNPCKLQDQ Y1, Y0, Y4; \
	VPUNPCKHQDQ Y1, Y0, Y5; \
	VPUNPCKLQDQ Y3, Y2, Y6; \
	VPUNPCKHQDQ Y3, Y2, Y7; \
	VPERM2I128  $0x20, Y6, Y4, Y0; \
	VPERM2I128  $0x20, Y7, Y5, Y1; \
	VPERM2I128  $0x31, Y6, Y4, Y2; \
	VPERM2I128  $0x31, Y7, Y5, Y3; \
	VMOVDQU     Y0, (DI); \
	VMOVDQU     Y1, (R8); \
	VMOVDQU     Y2, (R9); \
	VMOVDQU     Y3, (R10)

// Join: load 32 bytes of each plane and transpose back into Y0..Y3.
#define JOIN32_LOAD \
	VMOVDQU     (DI), Y0; \
	VMOVDQU     (R8), Y1; \
	VMOVDQU     (R9), Y2; \
	VMOVDQU     (R10), Y3; \
	VPERM2I128  $0x20, Y2, Y0, Y4; \
	VPERM2I128  $0x31, Y2, Y0, Y6; \
	VPERM2I128  $0x20, Y3, Y1, Y5; \
	VPERM2I128  $0x31, Y3, Y1, Y7; \
	VPUNPCKLQDQ Y5, Y4, Y0; \
	VPUNPCKHQDQ Y5, Y4, Y1; \
	VPUNPCKLQDQ Y7, Y6, Y2; \
	VPUNPCKHQDQ Y7, Y6, Y3; \
	VPERMD      Y0, Y12, Y0; \
	VPERMD      Y1, Y12, Y1; \
	VPERMD      Y2, Y12, Y2; \
	VPERMD      Y3, Y12, Y3; \
	VPSHUFB     Y13, Y0, Y0; \
	VPSHUFB     Y13, Y1, Y1; \
	VPSHUFB     Y13, Y2, Y2; \
	VPSHUFB     Y13, Y3, Y3

#define STORE4(p) \
	VMOVDQU Y0, (p); \
	VMOVDQU Y1, 32(p); \
	VMOVDQU Y2, 64(p); \
	VMOVDQU Y3, 96(p)

#define LOAD4(p) \
	VMOVDQU (p), Y0; \
	VMOVDQU 32(p), Y1; \
	VMOVDQU 64(p), Y2; \
	VMOVDQU 96(p), Y3

#define ADVANCE32 \
	ADDQ $128, SI; \
	ADDQ $128, DX; \
	ADDQ $32, DI; \
	ADDQ $32, R8; \
	ADDQ $32, R9; \
	ADDQ $32, R10; \
	SUBQ $32, CX

// Common prologue: DI, R8, R9, R10 = planes 0..3; SI = plain/out; DX = ref;
// CX = n; AX = mode; constants in Y12..Y15.
#define PROLOGUE(perm) \
	MOVQ         pl+0(FP), DI; \
	MOVQ         plain+8(FP), SI; \
	MOVQ         ref+16(FP), DX; \
	MOVQ         n+24(FP), CX; \
	MOVQ         stride+32(FP), BX; \
	MOVQ         mode+40(FP), AX; \
	LEAQ         (DI)(BX*1), R8; \
	LEAQ         (R8)(BX*1), R9; \
	LEAQ         (R9)(BX*1), R10; \
	VPCMPEQD     Y15, Y15, Y15; \
	VPSLLD       $31, Y15, Y14; \
	VMOVDQU      shuf32<>(SB), Y13; \
	VMOVDQU      perm(SB), Y12

// func split32AVX2(pl, plain, ref *byte, n, stride, mode int)
TEXT ·split32AVX2(SB), NOSPLIT, $0-48
	PROLOGUE(perm32<>)
	CMPQ AX, $1
	JEQ  s32xor
	CMPQ AX, $2
	JEQ  s32sub
	CMPQ AX, $3
	JEQ  s32raw

s32base:
	LOAD4(SI)
	ROT32(Y0, Y4)
	ROT32(Y1, Y4)
	ROT32(Y2, Y4)
	ROT32(Y3, Y4)
	SPLIT32_STORE
	ADVANCE32
	JNZ s32base
	VZEROUPPER
	RET

s32xor:
	LOAD4(SI)
	VPXOR (DX), Y0, Y0
	VPXOR 32(DX), Y1, Y1
	VPXOR 64(DX), Y2, Y2
	VPXOR 96(DX), Y3, Y3
	SPLIT32_STORE
	ADVANCE32
	JNZ s32xor
	VZEROUPPER
	RET

s32raw:
	LOAD4(SI)
	SPLIT32_STORE
	ADVANCE32
	JNZ s32raw
	VZEROUPPER
	RET

s32sub:
	LOAD4(SI)
	SUB32(Y0, (DX), Y4, Y5)
	SUB32(Y1, 32(DX), Y4, Y5)
	SUB32(Y2, 64(DX), Y4, Y5)
	SUB32(Y3, 96(DX), Y4, Y5)
	SPLIT32_STORE
	ADVANCE32
	JNZ s32sub
	VZEROUPPER
	RET

// func join32AVX2(pl, out, ref *byte, n, stride, mode int)
TEXT ·join32AVX2(SB), NOSPLIT, $0-48
	PROLOGUE(unperm32<>)
	CMPQ AX, $1
	JEQ  j32xor
	CMPQ AX, $2
	JEQ  j32sub
	CMPQ AX, $3
	JEQ  j32raw

j32base:
	JOIN32_LOAD
	UNROT32(Y0, Y4)
	UNROT32(Y1, Y4)
	UNROT32(Y2, Y4)
	UNROT32(Y3, Y4)
	STORE4(SI)
	ADVANCE32
	JNZ j32base
	VZEROUPPER
	RET

j32xor:
	JOIN32_LOAD
	VPXOR (DX), Y0, Y0
	VPXOR 32(DX), Y1, Y1
	VPXOR 64(DX), Y2, Y2
	VPXOR 96(DX), Y3, Y3
	STORE4(SI)
	ADVANCE32
	JNZ j32xor
	VZEROUPPER
	RET

j32raw:
	JOIN32_LOAD
	STORE4(SI)
	ADVANCE32
	JNZ j32raw
	VZEROUPPER
	RET

j32sub:
	JOIN32_LOAD
	UNSUB32(Y0, (DX), Y4, Y5)
	UNSUB32(Y1, 32(DX), Y4, Y5)
	UNSUB32(Y2, 64(DX), Y4, Y5)
	UNSUB32(Y3, 96(DX), Y4, Y5)
	STORE4(SI)
	ADVANCE32
	JNZ j32sub
	VZEROUPPER
	RET

// ---- 16-bit elements: 32 per iteration, two registers ----

// Y0, Y1 (32 elements) -> 32 bytes of planes 0 and 1 at DI, R8.
#define SPLIT16_STORE \
	VPSHUFB    Y13, Y0, Y0; \
	VPSHUFB    Y13, Y1, Y1; \
	VPERMQ     $0xD8, Y0, Y0; \
	VPERMQ     $0xD8, Y1, Y1; \
	VPERM2I128 $0x20, Y1, Y0, Y2; \
	VPERM2I128 $0x31, Y1, Y0, Y3; \
	VMOVDQU    Y2, (DI); \
	VMOVDQU    Y3, (R8)

#define JOIN16_LOAD \
	VMOVDQU    (DI), Y2; \
	VMOVDQU    (R8), Y3; \
	VPERM2I128 $0x20, Y3, Y2, Y0; \
	VPERM2I128 $0x31, Y3, Y2, Y1; \
	VPERMQ     $0xD8, Y0, Y0; \
	VPERMQ     $0xD8, Y1, Y1; \
	VPSHUFB    Y13, Y0, Y0; \
	VPSHUFB    Y13, Y1, Y1

#define ADVANCE16 \
	ADDQ $64, SI; \
	ADDQ $64, DX; \
	ADDQ $32, DI; \
	ADDQ $32, R8; \
	SUBQ $32, CX

#define PROLOGUE16(shuf) \
	MOVQ     pl+0(FP), DI; \
	MOVQ     plain+8(FP), SI; \
	MOVQ     ref+16(FP), DX; \
	MOVQ     n+24(FP), CX; \
	MOVQ     stride+32(FP), BX; \
	MOVQ     mode+40(FP), AX; \
	LEAQ     (DI)(BX*1), R8; \
	VPCMPEQD Y15, Y15, Y15; \
	VPSLLW   $15, Y15, Y14; \
	VMOVDQU  shuf(SB), Y13

// func split16AVX2(pl, plain, ref *byte, n, stride, mode int)
TEXT ·split16AVX2(SB), NOSPLIT, $0-48
	PROLOGUE16(shuf16<>)
	CMPQ AX, $1
	JEQ  s16xor
	CMPQ AX, $2
	JEQ  s16sub
	CMPQ AX, $3
	JEQ  s16raw

s16base:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	ROT16(Y0, Y4)
	ROT16(Y1, Y4)
	SPLIT16_STORE
	ADVANCE16
	JNZ s16base
	VZEROUPPER
	RET

s16xor:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	VPXOR   (DX), Y0, Y0
	VPXOR   32(DX), Y1, Y1
	SPLIT16_STORE
	ADVANCE16
	JNZ s16xor
	VZEROUPPER
	RET

s16raw:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	SPLIT16_STORE
	ADVANCE16
	JNZ s16raw
	VZEROUPPER
	RET

s16sub:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	SUB16(Y0, (DX), Y4, Y5)
	SUB16(Y1, 32(DX), Y4, Y5)
	SPLIT16_STORE
	ADVANCE16
	JNZ s16sub
	VZEROUPPER
	RET

// func join16AVX2(pl, out, ref *byte, n, stride, mode int)
TEXT ·join16AVX2(SB), NOSPLIT, $0-48
	PROLOGUE16(unshuf16<>)
	CMPQ AX, $1
	JEQ  j16xor
	CMPQ AX, $2
	JEQ  j16sub
	CMPQ AX, $3
	JEQ  j16raw

j16base:
	JOIN16_LOAD
	UNROT16(Y0, Y4)
	UNROT16(Y1, Y4)
	VMOVDQU Y0, (SI)
	VMOVDQU Y1, 32(SI)
	ADVANCE16
	JNZ j16base
	VZEROUPPER
	RET

j16xor:
	JOIN16_LOAD
	VPXOR   (DX), Y0, Y0
	VPXOR   32(DX), Y1, Y1
	VMOVDQU Y0, (SI)
	VMOVDQU Y1, 32(SI)
	ADVANCE16
	JNZ j16xor
	VZEROUPPER
	RET

j16raw:
	JOIN16_LOAD
	VMOVDQU Y0, (SI)
	VMOVDQU Y1, 32(SI)
	ADVANCE16
	JNZ j16raw
	VZEROUPPER
	RET

j16sub:
	JOIN16_LOAD
	UNSUB16(Y0, (DX), Y4, Y5)
	UNSUB16(Y1, 32(DX), Y4, Y5)
	VMOVDQU Y0, (SI)
	VMOVDQU Y1, 32(SI)
	ADVANCE16
	JNZ j16sub
	VZEROUPPER
	RET

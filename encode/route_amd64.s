//go:build amd64 && !noasm

#include "textflag.h"
#include "transform_amd64.h"

// AVX2 kernels of the grouped planes (group.go), for up to four groups and
// t = 0, eight elements per iteration. An element's group comes from its
// reference's context byte c (the 8 bits below the sign) and three
// thresholds: ge_i = c > thr[i] (thr holds the thresholds minus one, or
// 0x7FFF for a group that is not used), group = ge_1 + ge_2 + ge_3. The
// elements of group g that the mask keeps ("changed") are its lanes sel_g;
// VMOVMSKPS gives them as 8 bits, which index a table of lane permutations:
// compress32 moves the selected lanes to the front (encode), expand32 moves
// the first lanes to the selected positions and masks the rest (decode).
// Each group's transformed words are a stream with a cursor (an element
// index into the word buffer z) that advances by the popcount.
//
// The mask is always there (all ones when the chunk has none), one byte
// per eight elements.
//
// Registers: Y10-Y12 thresholds, Y13 the bit of each lane (mask bytes),
// Y14 sign bits, Y15 all ones; R10-R13 the four cursors (or counts).

DATA lanebit32<>+0(SB)/8, $0x0000000200000001
DATA lanebit32<>+8(SB)/8, $0x0000000800000004
DATA lanebit32<>+16(SB)/8, $0x0000002000000010
DATA lanebit32<>+24(SB)/8, $0x0000008000000040
GLOBL lanebit32<>(SB), RODATA|NOPTR, $32

DATA lanebit16<>+0(SB)/8, $0x0008000400020001
DATA lanebit16<>+8(SB)/8, $0x0080004000200010
DATA lanebit16<>+16(SB)/8, $0
DATA lanebit16<>+24(SB)/8, $0
GLOBL lanebit16<>(SB), RODATA|NOPTR, $32

// Constants and cursors; thr and cur are pointers in BX and R9 scratch.
#define SETUP32 \
	VPCMPEQD     Y15, Y15, Y15;       \
	VPSLLD       $31, Y15, Y14;       \
	VMOVDQU      lanebit32<>(SB), Y13; \
	MOVQ         thr+48(FP), BX;      \
	VPBROADCASTD (BX), Y10;           \
	VPBROADCASTD 4(BX), Y11;          \
	VPBROADCASTD 8(BX), Y12;          \
	MOVQ         cur+56(FP), BX;      \
	MOVQ         (BX), R10;           \
	MOVQ         8(BX), R11;          \
	MOVQ         16(BX), R12;         \
	MOVQ         24(BX), R13

#define SAVECUR \
	MOVQ cur+56(FP), BX; \
	MOVQ R10, (BX);      \
	MOVQ R11, 8(BX);     \
	MOVQ R12, 16(BX);    \
	MOVQ R13, 24(BX)

// Y0 = reference words -> Y2, Y3, Y4 = ge_1, ge_2, ge_3 (Y1 clobbered).
#define CTX32 \
	VPSLLD   $1, Y0, Y1;    \
	VPSRLD   $24, Y1, Y1;   \
	VPCMPGTD Y10, Y1, Y2;   \
	VPCMPGTD Y11, Y1, Y3;   \
	VPCMPGTD Y12, Y1, Y4

// Y5 = changed lanes from the mask byte at R8.
#define CHANGED32 \
	VPBROADCASTB (R8), Y5;   \
	VPAND        Y13, Y5, Y5; \
	VPCMPEQD     Y13, Y5, Y5

// sel_0..sel_3 -> Y1, Y7, Y8, Y4 from ge (Y2-Y4) and changed (Y5).
#define SELECT32 \
	VPANDN Y5, Y2, Y1; \
	VPANDN Y2, Y3, Y7; \
	VPAND  Y5, Y7, Y7; \
	VPANDN Y3, Y4, Y8; \
	VPAND  Y5, Y8, Y8; \
	VPAND  Y5, Y4, Y4

// Compress the lanes of Y6 selected by S to z at cursor C (R9: table).
#define PUSH32(S, C) \
	VMOVMSKPS S, AX;          \
	POPCNTL   AX, BX;         \
	SHLQ      $5, AX;         \
	VMOVDQU   (R9)(AX*1), Y9; \
	VPERMD    Y6, Y9, Y9;     \
	VMOVDQU   Y9, (DI)(C*4);  \
	ADDQ      BX, C

// Expand the words of z at cursor C into the lanes of Y6 selected by S.
#define PULL32(S, C) \
	VMOVMSKPS S, AX;              \
	POPCNTL   AX, BX;             \
	SHLQ      $6, AX;             \
	VMOVDQU   (R9)(AX*1), Y2;     \
	VPERMD    (DI)(C*4), Y2, Y9;  \
	VPAND     32(R9)(AX*1), Y9, Y9; \
	VPOR      Y9, Y6, Y6;         \
	ADDQ      BX, C

// func count32AVX2(ref, plain, mask *byte, n, how, pad int, thr *[4]int32, cur *[4]int)
// Adds each group's changed elements to cur. how: 0 all count, 1 the
// changed ones (plain != ref), whose mask bytes it writes, 2 those the
// mask bytes say.
TEXT ·count32AVX2(SB), NOSPLIT, $0-64
	MOVQ ref+0(FP), SI
	MOVQ plain+8(FP), DX
	MOVQ mask+16(FP), R8
	MOVQ n+24(FP), CX
	MOVQ how+32(FP), DI
	SETUP32
	CMPQ DI, $2
	JEQ  c32read
	CMPQ DI, $0
	JNE  c32loop
	XORQ R8, R8

c32loop:
	VMOVDQU (SI), Y0
	CTX32
	VMOVDQU Y15, Y5
	CMPQ    DI, $1
	JNE     c32sel
	VPCMPEQD  (DX), Y0, Y5
	VPXOR     Y15, Y5, Y5
	VMOVMSKPS Y5, AX
	MOVB      AX, (R8)
	INCQ      R8
	ADDQ      $32, DX

c32sel:
	SELECT32
	VMOVMSKPS Y1, AX
	POPCNTL   AX, AX
	ADDQ      AX, R10
	VMOVMSKPS Y7, AX
	POPCNTL   AX, AX
	ADDQ      AX, R11
	VMOVMSKPS Y8, AX
	POPCNTL   AX, AX
	ADDQ      AX, R12
	VMOVMSKPS Y4, AX
	POPCNTL   AX, AX
	ADDQ      AX, R13
	ADDQ      $32, SI
	SUBQ      $8, CX
	JNZ       c32loop
	SAVECUR
	VZEROUPPER
	RET

c32read:
	VMOVDQU (SI), Y0
	CTX32
	CHANGED32
	SELECT32
	VMOVMSKPS Y1, AX
	POPCNTL   AX, AX
	ADDQ      AX, R10
	VMOVMSKPS Y7, AX
	POPCNTL   AX, AX
	ADDQ      AX, R11
	VMOVMSKPS Y8, AX
	POPCNTL   AX, AX
	ADDQ      AX, R12
	VMOVMSKPS Y4, AX
	POPCNTL   AX, AX
	ADDQ      AX, R13
	ADDQ      $32, SI
	INCQ      R8
	SUBQ      $8, CX
	JNZ       c32read
	SAVECUR
	VZEROUPPER
	RET

// func route32AVX2(z, plain, ref, mask *byte, n, mode int, thr *[4]int32, cur *[4]int, lut *uint32)
// Transforms n elements (a positive multiple of 8) and appends each changed
// one to its group's stream in z. lut: compress32.
TEXT ·route32AVX2(SB), NOSPLIT, $0-72
	MOVQ z+0(FP), DI
	MOVQ plain+8(FP), DX
	MOVQ ref+16(FP), SI
	MOVQ mask+24(FP), R8
	MOVQ n+32(FP), CX
	SETUP32
	MOVQ lut+64(FP), R9
	MOVQ mode+40(FP), AX
	CMPQ AX, $1
	JEQ  r32xor
	CMPQ AX, $2
	JEQ  r32sub

r32base:
	VMOVDQU (SI), Y0
	CTX32
	CHANGED32
	VMOVDQU (DX), Y6
	ROT32(Y6, Y7)
	SELECT32
	PUSH32(Y1, R10)
	PUSH32(Y7, R11)
	PUSH32(Y8, R12)
	PUSH32(Y4, R13)
	ADDQ $32, SI
	ADDQ $32, DX
	INCQ R8
	SUBQ $8, CX
	JNZ  r32base
	JMP  r32done

r32xor:
	VMOVDQU (SI), Y0
	CTX32
	CHANGED32
	VMOVDQU (DX), Y6
	VPXOR   Y0, Y6, Y6
	SELECT32
	PUSH32(Y1, R10)
	PUSH32(Y7, R11)
	PUSH32(Y8, R12)
	PUSH32(Y4, R13)
	ADDQ $32, SI
	ADDQ $32, DX
	INCQ R8
	SUBQ $8, CX
	JNZ  r32xor
	JMP  r32done

r32sub:
	VMOVDQU (SI), Y0
	CTX32
	CHANGED32
	VMOVDQU (DX), Y6
	VMOVDQU Y0, Y8
	SUB32R(Y6, Y8, Y7)
	SELECT32
	PUSH32(Y1, R10)
	PUSH32(Y7, R11)
	PUSH32(Y8, R12)
	PUSH32(Y4, R13)
	ADDQ $32, SI
	ADDQ $32, DX
	INCQ R8
	SUBQ $8, CX
	JNZ  r32sub

r32done:
	SAVECUR
	VZEROUPPER
	RET

// func unroute32AVX2(out, z, ref, mask *byte, n, mode int, thr *[4]int32, cur *[4]int, lut *uint32)
// route32AVX2's inverse: takes each changed element's word from its
// group's stream, unchanged ones get zero, and undoes the transform; with
// a mask and the baseline transform unchanged elements get the reference.
// lut: expand32.
TEXT ·unroute32AVX2(SB), NOSPLIT, $0-72
	MOVQ out+0(FP), DX
	MOVQ z+8(FP), DI
	MOVQ ref+16(FP), SI
	MOVQ mask+24(FP), R8
	MOVQ n+32(FP), CX
	SETUP32
	MOVQ lut+64(FP), R9
	MOVQ mode+40(FP), AX
	CMPQ AX, $1
	JEQ  u32xor
	CMPQ AX, $2
	JEQ  u32sub

u32base:
	VMOVDQU (SI), Y0
	CTX32
	CHANGED32
	SELECT32
	VPXOR   Y6, Y6, Y6
	PULL32(Y1, R10)
	PULL32(Y7, R11)
	PULL32(Y8, R12)
	PULL32(Y4, R13)
	UNROT32(Y6, Y9)
	VPBLENDVB Y5, Y6, Y0, Y6
	VMOVDQU Y6, (DX)
	ADDQ $32, SI
	ADDQ $32, DX
	INCQ R8
	SUBQ $8, CX
	JNZ  u32base
	JMP  u32done

u32xor:
	VMOVDQU (SI), Y0
	CTX32
	CHANGED32
	SELECT32
	VPXOR   Y6, Y6, Y6
	PULL32(Y1, R10)
	PULL32(Y7, R11)
	PULL32(Y8, R12)
	PULL32(Y4, R13)
	VPXOR   Y0, Y6, Y6
	VMOVDQU Y6, (DX)
	ADDQ $32, SI
	ADDQ $32, DX
	INCQ R8
	SUBQ $8, CX
	JNZ  u32xor
	JMP  u32done

u32sub:
	VMOVDQU (SI), Y0
	CTX32
	CHANGED32
	SELECT32
	VPXOR   Y6, Y6, Y6
	PULL32(Y1, R10)
	PULL32(Y7, R11)
	PULL32(Y8, R12)
	PULL32(Y4, R13)
	UNSUB32R(Y6, Y0, Y9)
	VMOVDQU Y6, (DX)
	ADDQ $32, SI
	ADDQ $32, DX
	INCQ R8
	SUBQ $8, CX
	JNZ  u32sub

u32done:
	SAVECUR
	VZEROUPPER
	RET

// ---- 16-bit elements: eight per iteration, in the low 128 bits ----

#define SETUP16 \
	VPCMPEQD     Y15, Y15, Y15;       \
	VPSLLW       $15, Y15, Y14;       \
	VMOVDQU      lanebit16<>(SB), Y13; \
	MOVQ         thr+48(FP), BX;      \
	VPBROADCASTW (BX), Y10;           \
	VPBROADCASTW 4(BX), Y11;          \
	VPBROADCASTW 8(BX), Y12;          \
	MOVQ         cur+56(FP), BX;      \
	MOVQ         (BX), R10;           \
	MOVQ         8(BX), R11;          \
	MOVQ         16(BX), R12;         \
	MOVQ         24(BX), R13

#define CTX16 \
	VPSLLW   $1, Y0, Y1;    \
	VPSRLW   $8, Y1, Y1;    \
	VPCMPGTW Y10, Y1, Y2;   \
	VPCMPGTW Y11, Y1, Y3;   \
	VPCMPGTW Y12, Y1, Y4

#define CHANGED16 \
	VPBROADCASTB (R8), Y5;   \
	VPAND        Y13, Y5, Y5; \
	VPCMPEQW     Y13, Y5, Y5

// AX = the 8 lane bits of the word mask S (Y9 clobbered).
#define MASK16(S) \
	VPACKSSWB S, S, Y9; \
	VPMOVMSKB Y9, AX;   \
	ANDL      $0xFF, AX

#define PUSH16(S, C) \
	MASK16(S);                   \
	POPCNTL AX, BX;              \
	SHLQ    $4, AX;              \
	VPSHUFB (R9)(AX*1), X6, X9;  \
	VMOVDQU X9, (DI)(C*2);       \
	ADDQ    BX, C

#define PULL16(S, C) \
	MASK16(S);                   \
	POPCNTL AX, BX;              \
	SHLQ    $4, AX;              \
	VMOVDQU (DI)(C*2), X9;       \
	VPSHUFB (R9)(AX*1), X9, X9;  \
	VPOR    Y9, Y6, Y6;          \
	ADDQ    BX, C

// func count16AVX2(ref, plain, mask *byte, n, how, pad int, thr *[4]int32, cur *[4]int)
TEXT ·count16AVX2(SB), NOSPLIT, $0-64
	MOVQ ref+0(FP), SI
	MOVQ plain+8(FP), DX
	MOVQ mask+16(FP), R8
	MOVQ n+24(FP), CX
	MOVQ how+32(FP), DI
	SETUP16

c16loop:
	VMOVDQU (SI), X0
	CTX16
	CMPQ DI, $2
	JEQ  c16read
	VMOVDQU Y15, Y5
	CMPQ    DI, $1
	JNE     c16sel
	VMOVDQU  (DX), X6
	VPCMPEQW Y6, Y0, Y5
	VPXOR    Y15, Y5, Y5
	MASK16(Y5)
	MOVB     AX, (R8)
	INCQ     R8
	ADDQ     $16, DX
	JMP      c16sel

c16read:
	CHANGED16
	INCQ R8

c16sel:
	SELECT32
	MASK16(Y1)
	POPCNTL AX, AX
	ADDQ    AX, R10
	MASK16(Y7)
	POPCNTL AX, AX
	ADDQ    AX, R11
	MASK16(Y8)
	POPCNTL AX, AX
	ADDQ    AX, R12
	MASK16(Y4)
	POPCNTL AX, AX
	ADDQ    AX, R13
	ADDQ    $16, SI
	SUBQ    $8, CX
	JNZ     c16loop
	SAVECUR
	VZEROUPPER
	RET

// func route16AVX2(z, plain, ref, mask *byte, n, mode int, thr *[4]int32, cur *[4]int, lut *[16]byte)
TEXT ·route16AVX2(SB), NOSPLIT, $0-72
	MOVQ z+0(FP), DI
	MOVQ plain+8(FP), DX
	MOVQ ref+16(FP), SI
	MOVQ mask+24(FP), R8
	MOVQ n+32(FP), CX
	SETUP16
	MOVQ lut+64(FP), R9
	MOVQ mode+40(FP), AX
	CMPQ AX, $1
	JEQ  r16xor
	CMPQ AX, $2
	JEQ  r16sub

r16base:
	VMOVDQU (SI), X0
	CTX16
	CHANGED16
	VMOVDQU (DX), X6
	ROT16(Y6, Y7)
	SELECT32
	PUSH16(Y1, R10)
	PUSH16(Y7, R11)
	PUSH16(Y8, R12)
	PUSH16(Y4, R13)
	ADDQ $16, SI
	ADDQ $16, DX
	INCQ R8
	SUBQ $8, CX
	JNZ  r16base
	JMP  r16done

r16xor:
	VMOVDQU (SI), X0
	CTX16
	CHANGED16
	VMOVDQU (DX), X6
	VPXOR   Y0, Y6, Y6
	SELECT32
	PUSH16(Y1, R10)
	PUSH16(Y7, R11)
	PUSH16(Y8, R12)
	PUSH16(Y4, R13)
	ADDQ $16, SI
	ADDQ $16, DX
	INCQ R8
	SUBQ $8, CX
	JNZ  r16xor
	JMP  r16done

r16sub:
	VMOVDQU (SI), X0
	CTX16
	CHANGED16
	VMOVDQU (DX), X6
	VMOVDQU Y0, Y8
	SUB16R(Y6, Y8, Y7)
	SELECT32
	PUSH16(Y1, R10)
	PUSH16(Y7, R11)
	PUSH16(Y8, R12)
	PUSH16(Y4, R13)
	ADDQ $16, SI
	ADDQ $16, DX
	INCQ R8
	SUBQ $8, CX
	JNZ  r16sub

r16done:
	SAVECUR
	VZEROUPPER
	RET

// func unroute16AVX2(out, z, ref, mask *byte, n, mode int, thr *[4]int32, cur *[4]int, lut *[16]byte)
TEXT ·unroute16AVX2(SB), NOSPLIT, $0-72
	MOVQ out+0(FP), DX
	MOVQ z+8(FP), DI
	MOVQ ref+16(FP), SI
	MOVQ mask+24(FP), R8
	MOVQ n+32(FP), CX
	SETUP16
	MOVQ lut+64(FP), R9
	MOVQ mode+40(FP), AX
	CMPQ AX, $1
	JEQ  u16xor
	CMPQ AX, $2
	JEQ  u16sub

u16base:
	VMOVDQU (SI), X0
	CTX16
	CHANGED16
	SELECT32
	VPXOR   Y6, Y6, Y6
	PULL16(Y1, R10)
	PULL16(Y7, R11)
	PULL16(Y8, R12)
	PULL16(Y4, R13)
	UNROT16(Y6, Y9)
	VPBLENDVB Y5, Y6, Y0, Y6
	VMOVDQU X6, (DX)
	ADDQ $16, SI
	ADDQ $16, DX
	INCQ R8
	SUBQ $8, CX
	JNZ  u16base
	JMP  u16done

u16xor:
	VMOVDQU (SI), X0
	CTX16
	CHANGED16
	SELECT32
	VPXOR   Y6, Y6, Y6
	PULL16(Y1, R10)
	PULL16(Y7, R11)
	PULL16(Y8, R12)
	PULL16(Y4, R13)
	VPXOR   Y0, Y6, Y6
	VMOVDQU X6, (DX)
	ADDQ $16, SI
	ADDQ $16, DX
	INCQ R8
	SUBQ $8, CX
	JNZ  u16xor
	JMP  u16done

u16sub:
	VMOVDQU (SI), X0
	CTX16
	CHANGED16
	SELECT32
	VPXOR   Y6, Y6, Y6
	PULL16(Y1, R10)
	PULL16(Y7, R11)
	PULL16(Y8, R12)
	PULL16(Y4, R13)
	UNSUB16R(Y6, Y0, Y9)
	VMOVDQU X6, (DX)
	ADDQ $16, SI
	ADDQ $16, DX
	INCQ R8
	SUBQ $8, CX
	JNZ  u16sub

u16done:
	SAVECUR
	VZEROUPPER
	RET

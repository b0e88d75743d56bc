// Element transforms of the planes codec for the AVX2 kernels
// (transform_amd64.s, route_amd64.s), one register R at a time with scratch
// registers S and T. They expect Y15 = all ones and Y14 = the sign bit of
// every lane (X14, X15 for the 128-bit forms).

// ---- 32-bit element transforms, on one register R with scratch S, T ----

// rot: rotate left by one (baseline: exponent heads the top plane).
#define ROT32(R, S) \
	VPSRLD $31, R, S; \
	VPSLLD $1, R, R; \
	VPOR   S, R, R

#define UNROT32(R, S) \
	VPSLLD $31, R, S; \
	VPSRLD $1, R, R; \
	VPOR   S, R, R

// mono: x ^ (sar(x, 31) | sign).
#define MONO32(R, S) \
	VPSRAD $31, R, S; \
	VPOR   Y14, S, S; \
	VPXOR  S, R, R

// unmono: m ^ (^sar(m, 31) | sign).
#define UNMONO32(R, S) \
	VPSRAD $31, R, S; \
	VPXOR  Y15, S, S; \
	VPOR   Y14, S, S; \
	VPXOR  S, R, R

// SUBxxR: R = zigzag(mono(R) - mono(T)), T clobbered; SUBxx loads T from
// mem. UNSUBxxR: R = unmono(mono(T) + unzigzag(R)), T clobbered.
#define SUB32R(R, T, S) \
	MONO32(R, S); \
	MONO32(T, S); \
	VPSUBD  T, R, R; \
	VPSRAD  $31, R, S; \
	VPSLLD  $1, R, R; \
	VPXOR   S, R, R

#define SUB32(R, mem, S, T) \
	VMOVDQU mem, T; \
	SUB32R(R, T, S)

#define UNSUB32R(R, T, S) \
	VPSLLD  $31, R, S; \
	VPSRAD  $31, S, S; \
	VPSRLD  $1, R, R; \
	VPXOR   S, R, R; \
	MONO32(T, S); \
	VPADDD  T, R, R; \
	UNMONO32(R, S)

#define UNSUB32(R, mem, S, T) \
	VMOVDQU mem, T; \
	UNSUB32R(R, T, S)

#define ROT16(R, S) \
	VPSRLW $15, R, S; \
	VPSLLW $1, R, R; \
	VPOR   S, R, R

#define UNROT16(R, S) \
	VPSLLW $15, R, S; \
	VPSRLW $1, R, R; \
	VPOR   S, R, R

#define MONO16(R, S) \
	VPSRAW $15, R, S; \
	VPOR   Y14, S, S; \
	VPXOR  S, R, R

#define UNMONO16(R, S) \
	VPSRAW $15, R, S; \
	VPXOR  Y15, S, S; \
	VPOR   Y14, S, S; \
	VPXOR  S, R, R

#define SUB16R(R, T, S) \
	MONO16(R, S); \
	MONO16(T, S); \
	VPSUBW  T, R, R; \
	VPSRAW  $15, R, S; \
	VPSLLW  $1, R, R; \
	VPXOR   S, R, R

#define SUB16(R, mem, S, T) \
	VMOVDQU mem, T; \
	SUB16R(R, T, S)

#define UNSUB16R(R, T, S) \
	VPSLLW  $15, R, S; \
	VPSRAW  $15, S, S; \
	VPSRLW  $1, R, R; \
	VPXOR   S, R, R; \
	MONO16(T, S); \
	VPADDW  T, R, R; \
	UNMONO16(R, S)

#define UNSUB16(R, mem, S, T) \
	VMOVDQU mem, T; \
	UNSUB16R(R, T, S)


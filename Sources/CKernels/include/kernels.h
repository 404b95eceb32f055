#ifndef AVGRAPH_KERNELS_H
#define AVGRAPH_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Pixel kernels that want vector registers Swift does not reach (byte shuffles across lanes). */

/* The quarter turn of 8-bit samples in 16x16 blocks: upright rows [0, uh) and columns [0, uw),
 * both multiples of 16, written at dst (line size dls) from the stored buffer at src (line size
 * sls, bw x bh samples). Upright (x, y) is stored at column (flip_x ? bw-1-y : y) and row
 * (flip_y ? bh-1-x : x): the StorageMap of a quarter turn. */
void avg_turn_bytes16(const uint8_t *src, ptrdiff_t sls, int bw, int bh,
                      uint8_t *dst, ptrdiff_t dls, int uw, int uh, int flip_x, int flip_y);

/* Scaling and a quarter turn of one 8-bit plane in one walk (scale_turn.c). The stored plane at
 * src (line size sls) is sw samples wide, or sw interleaved pairs (NV12 chroma) when `pairs`.
 * Upright column x (in [x0, x1)) is the filter `across` (across_taps Q14 coefficients per column,
 * applied to stored rows across_pos[x], across_pos[x] + 1, ...; the positions run one way) and
 * upright row y (in [0, dh)) the filter `down` over stored columns down_pos[y], ...; any flip is
 * in the filters (mirrored positions). `offset` (1/32 levels) is added after the second filter.
 * The plane's upright rows go to dst0 (line size dls); with `pairs`, the first samples' to dst0
 * and the second's to dst1. `rows` is avg_scale_turn_rows() of the whole filter across; scratch
 * holds avg_scale_turn_scratch(sw, pairs, rows) bytes for this call alone. simd: 0 plain C, 1
 * AVX2, 2 AVX-512BW, at most what avg_scale_turn_simd() says this CPU has; every path gives the
 * same bytes. Returns -1 for filters of over 128 taps (nothing written), else 0. */
int avg_scale_turn_rows(const int32_t *across_pos, int across_count, int across_taps);
size_t avg_scale_turn_scratch(int sw, int pairs, int rows);
int avg_scale_turn_simd(void);
int avg_scale_turn(const uint8_t *src, ptrdiff_t sls, int sw, int pairs,
                   const int32_t *across_pos, const int16_t *across_coef, int across_taps,
                   const int32_t *down_pos, const int16_t *down_coef, int down_taps, int dh, int offset,
                   uint8_t *dst0, uint8_t *dst1, ptrdiff_t dls, int x0, int x1, uint8_t *scratch, int rows, int simd);

#endif

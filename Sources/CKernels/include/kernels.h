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

#endif

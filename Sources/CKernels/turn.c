#include "kernels.h"
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#define AVG_STREAM_STORES 1
#else
#define AVG_STREAM_STORES 0
#endif

typedef uint8_t v16 __attribute__((vector_size(16)));

static inline v16 load16(const uint8_t *p) {
    v16 v;
    memcpy(&v, p, 16);
    return v;
}

static inline void store16(uint8_t *p, v16 v) { memcpy(p, &v, 16); }

/* Interleaving row i with row i+8, low halves into row 2i and high halves into row 2i+1, rotates
 * the 4-bit row and column indices by one bit each; four rounds transpose the block. The rounds
 * go from one array to the other and back (no copy between them: a 256-byte copy per round
 * became a call to memcpy). */
static inline void interleave_round(const v16 *restrict r, v16 *restrict t) {
#pragma clang loop unroll(full)
    for (int i = 0; i < 8; i++) {
        t[2 * i] = __builtin_shufflevector(r[i], r[i + 8], 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        t[2 * i + 1] = __builtin_shufflevector(r[i], r[i + 8], 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    }
}

void avg_turn_bytes16(const uint8_t *src, ptrdiff_t sls, int bw, int bh,
                      uint8_t *dst, ptrdiff_t dls, int uw, int uh, int flip_x, int flip_y) {
    /* Tiles of 64x64 keep the 64 buffer rows a tile reads in cache while its columns are used.
     * A whole tile is transposed into a staging block that stays in L1, then written out a
     * whole 64-byte line at a time with non-temporal stores: the turned picture (3 MB of luma)
     * is bigger than the cache, and a normal store reads each destination line before writing
     * it. Streaming 16-byte pieces straight from the transpose was slower (partial lines);
     * whole lines cut the turn's CPU by about a sixth, bit for bit the same picture. */
    enum { tile = 64 };
    for (int ty = 0; ty < uh; ty += tile) {
        int ty_end = ty + tile < uh ? ty + tile : uh;
        for (int tx = 0; tx < uw; tx += tile) {
            int tx_end = tx + tile < uw ? tx + tile : uw;
            _Alignas(64) uint8_t staged[tile * tile];
            int whole = AVG_STREAM_STORES && tx_end - tx == tile &&
                        ((((uintptr_t)(dst + tx)) | (uintptr_t)dls) & 15) == 0;
            uint8_t *base = whole ? staged : dst + (ptrdiff_t)ty * dls + tx;
            ptrdiff_t bls = whole ? tile : dls;
            for (int y0 = ty; y0 < ty_end; y0 += 16) {
                int bx = flip_x ? bw - 16 - y0 : y0;
                for (int x0 = tx; x0 < tx_end; x0 += 16) {
                    v16 r[16], t[16];
                    for (int i = 0; i < 16; i++) {
                        int by = flip_y ? bh - 1 - (x0 + i) : x0 + i;
                        v16 v = load16(src + (ptrdiff_t)by * sls + bx);
                        r[i] = flip_x ? __builtin_shufflevector(v, v, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0) : v;
                    }
                    interleave_round(r, t);
                    interleave_round(t, r);
                    interleave_round(r, t);
                    interleave_round(t, r);
                    uint8_t *out = base + (ptrdiff_t)(y0 - ty) * bls + (x0 - tx);
                    for (int k = 0; k < 16; k++) store16(out + (ptrdiff_t)k * bls, r[k]);
                }
            }
#if AVG_STREAM_STORES
            if (whole) {
                for (int y = ty; y < ty_end; y++) {
                    __m128i *o = (__m128i *)(dst + (ptrdiff_t)y * dls + tx);
                    const __m128i *i = (const __m128i *)(staged + (y - ty) * tile);
                    _mm_stream_si128(o, i[0]);
                    _mm_stream_si128(o + 1, i[1]);
                    _mm_stream_si128(o + 2, i[2]);
                    _mm_stream_si128(o + 3, i[3]);
                }
            }
#endif
        }
    }
#if AVG_STREAM_STORES
    /* Streamed stores are weakly ordered: the picture must be whole before another thread reads it. */
    _mm_sfence();
#endif
}

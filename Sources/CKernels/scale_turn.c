#include "kernels.h"
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AVG_X86 1
#else
#define AVG_X86 0
#endif

/* Scaling a stored picture and turning it a quarter in one walk, every filter applied down the
 * columns of a buffer: whole rows of samples times one coefficient, no gathers. For a strip of
 * upright columns, the stored rows their filter reaches are widened once (NV12's pairs split into
 * a U half and a V half on the way); the filter across runs down those rows for eight upright
 * columns at once, and the eight sums of each stored column are transposed in registers and
 * stored as a row of the turned strip; the filter down runs down the turned strip's columns and
 * writes the upright rows. The strip stays in cache between the steps; the stored picture is read
 * once, row by row.
 *
 * Fixed point: samples widen to 1/128 levels; each tap is pmulhrsw's rounded product with a Q14
 * coefficient, so the filter across sums in 1/64 levels and the filter down, reading those sums
 * unrounded, in 1/32. The plain path does the same arithmetic, so both give the same bytes. */

enum { strip = 64, group = 8, max_taps = 128, ahead = 6 };

static inline int16_t tap(int16_t x, int16_t c) { return (int16_t)(((int)x * c + 16384) >> 15); }

/* A sum that started at offset + 16 (the rounding), to whole levels. */
static inline uint8_t level(int16_t sum) {
    int v = sum >> 5;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

static inline ptrdiff_t padded(ptrdiff_t bytes) { return (bytes + 63) & ~(ptrdiff_t)63; }

/* Samples in a widened row: the plane's width (twice it for pairs), rounded up for whole vectors. */
static inline int columns(int sw, int pairs) { return ((pairs ? 2 * sw : sw) + 31) & ~31; }

static void widen_plain(const uint8_t *src, int sw, int pairs, int16_t *out, int from) {
    for (int i = from; i < sw; i++) {
        if (pairs) {
            out[i] = (int16_t)(src[2 * i] << 7);
            out[sw + i] = (int16_t)(src[2 * i + 1] << 7);
        } else {
            out[i] = (int16_t)(src[i] << 7);
        }
    }
}

/* One upright column's filter across, written down column j of the turned strip. */
static void across_plain(const int16_t *w, ptrdiff_t wrow, const int16_t *c, int taps, int cols, int16_t *turned, int j) {
    for (int i = 0; i < cols; i++) {
        int16_t s = 0;
        for (int t = 0; t < taps; t++) s = (int16_t)(s + tap(w[t * wrow + i], c[t]));
        turned[(ptrdiff_t)i * strip + j] = s;
    }
}

static void down_plain(const int16_t *turned, const int16_t *c, int taps, int offset, uint8_t *out, int from, int count) {
    for (int i = from; i < count; i++) {
        int16_t s = (int16_t)(offset + 16);
        for (int t = 0; t < taps; t++) s = (int16_t)(s + tap(turned[(ptrdiff_t)t * strip + i], c[t]));
        out[i] = level(s);
    }
}

#if AVG_X86
__attribute__((target("avx2")))
static void widen_avx2(const uint8_t *src, int sw, int pairs, int16_t *out) {
    int i = 0;
    if (pairs) {
        const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                               0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        for (; i + 16 <= sw; i += 16) {
            __m256i v = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(src + 2 * i)), split);
            v = _mm256_permute4x64_epi64(v, 0xD8);
            _mm256_storeu_si256((__m256i *)(out + i), _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(v)), 7));
            _mm256_storeu_si256((__m256i *)(out + sw + i), _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm256_extracti128_si256(v, 1)), 7));
        }
    } else {
        for (; i + 16 <= sw; i += 16) {
            __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(src + i)));
            _mm256_storeu_si256((__m256i *)(out + i), _mm256_slli_epi16(w, 7));
        }
    }
    widen_plain(src, sw, pairs, out, i);
}

/* Eight upright columns' filters across (their rows at w + first[j] * wrow, coefficients splat
 * to whole vectors), 16 stored columns at a time; each 8x8 block of sums is transposed in its
 * 128-bit lane and stored as 16 bytes of 16 turned rows. */
__attribute__((target("avx2")))
static void across_avx2(const int16_t *w, ptrdiff_t wrow, const int *first, const __m256i *splat, int taps, int cols,
                        int16_t *turned, int j0) {
    const int16_t *p[group];
    for (int j = 0; j < group; j++) p[j] = w + (ptrdiff_t)first[j] * wrow;
    for (int i = 0; i < cols; i += 16) {
        __m256i s[group];
        for (int j = 0; j < group; j++) s[j] = _mm256_setzero_si256();
        for (int t = 0; t < taps; t++) {
            const ptrdiff_t at = t * wrow + i;
#pragma clang loop unroll(full)
            for (int j = 0; j < group; j++)
                s[j] = _mm256_add_epi16(s[j], _mm256_mulhrs_epi16(_mm256_loadu_si256((const __m256i *)(p[j] + at)), splat[j * taps + t]));
        }
        __m256i a0 = _mm256_unpacklo_epi16(s[0], s[1]), a1 = _mm256_unpackhi_epi16(s[0], s[1]);
        __m256i a2 = _mm256_unpacklo_epi16(s[2], s[3]), a3 = _mm256_unpackhi_epi16(s[2], s[3]);
        __m256i a4 = _mm256_unpacklo_epi16(s[4], s[5]), a5 = _mm256_unpackhi_epi16(s[4], s[5]);
        __m256i a6 = _mm256_unpacklo_epi16(s[6], s[7]), a7 = _mm256_unpackhi_epi16(s[6], s[7]);
        __m256i b0 = _mm256_unpacklo_epi32(a0, a2), b1 = _mm256_unpackhi_epi32(a0, a2);
        __m256i b2 = _mm256_unpacklo_epi32(a1, a3), b3 = _mm256_unpackhi_epi32(a1, a3);
        __m256i b4 = _mm256_unpacklo_epi32(a4, a6), b5 = _mm256_unpackhi_epi32(a4, a6);
        __m256i b6 = _mm256_unpacklo_epi32(a5, a7), b7 = _mm256_unpackhi_epi32(a5, a7);
        __m256i r[8] = {
            _mm256_unpacklo_epi64(b0, b4), _mm256_unpackhi_epi64(b0, b4), _mm256_unpacklo_epi64(b1, b5), _mm256_unpackhi_epi64(b1, b5),
            _mm256_unpacklo_epi64(b2, b6), _mm256_unpackhi_epi64(b2, b6), _mm256_unpacklo_epi64(b3, b7), _mm256_unpackhi_epi64(b3, b7),
        };
        int16_t *o = turned + (ptrdiff_t)i * strip + j0;
        for (int k = 0; k < 8; k++) {
            _mm_storeu_si128((__m128i *)(o + (ptrdiff_t)k * strip), _mm256_castsi256_si128(r[k]));
            _mm_storeu_si128((__m128i *)(o + (ptrdiff_t)(k + 8) * strip), _mm256_extracti128_si256(r[k], 1));
        }
    }
}

/* The group of eight upright columns from pos/coef (`left` of them remain before the part's
 * end): a group past the end repeats its last column, whose extra sums land in turned columns
 * nothing reads. */
__attribute__((target("avx2")))
static void across_group_avx2(const int16_t *widened, ptrdiff_t wrow, const int32_t *pos, const int16_t *coef, int taps,
                              int left, int lo, __m256i *splat, int cols, int16_t *turned, int j0) {
    int first[group];
    for (int j = 0; j < group; j++) {
        int x = j < left ? j : left - 1;
        first[j] = pos[x] - lo;
        for (int t = 0; t < taps; t++) splat[j * taps + t] = _mm256_set1_epi16(coef[(ptrdiff_t)x * taps + t]);
    }
    across_avx2(widened, wrow, first, splat, taps, cols, turned, j0);
}

/* The same with 32 stored columns at a time: each 128-bit lane holds eight of them. */
__attribute__((target("avx512f,avx512bw")))
static void across_avx512(const int16_t *w, ptrdiff_t wrow, const int *first, const __m512i *splat, int taps, int cols,
                          int16_t *turned, int j0) {
    const int16_t *p[group];
    for (int j = 0; j < group; j++) p[j] = w + (ptrdiff_t)first[j] * wrow;
    for (int i = 0; i < cols; i += 32) {
        __m512i s[group];
        for (int j = 0; j < group; j++) s[j] = _mm512_setzero_si512();
        for (int t = 0; t < taps; t++) {
            const ptrdiff_t at = t * wrow + i;
#pragma clang loop unroll(full)
            for (int j = 0; j < group; j++)
                s[j] = _mm512_add_epi16(s[j], _mm512_mulhrs_epi16(_mm512_loadu_si512((const void *)(p[j] + at)), splat[j * taps + t]));
        }
        __m512i a0 = _mm512_unpacklo_epi16(s[0], s[1]), a1 = _mm512_unpackhi_epi16(s[0], s[1]);
        __m512i a2 = _mm512_unpacklo_epi16(s[2], s[3]), a3 = _mm512_unpackhi_epi16(s[2], s[3]);
        __m512i a4 = _mm512_unpacklo_epi16(s[4], s[5]), a5 = _mm512_unpackhi_epi16(s[4], s[5]);
        __m512i a6 = _mm512_unpacklo_epi16(s[6], s[7]), a7 = _mm512_unpackhi_epi16(s[6], s[7]);
        __m512i b0 = _mm512_unpacklo_epi32(a0, a2), b1 = _mm512_unpackhi_epi32(a0, a2);
        __m512i b2 = _mm512_unpacklo_epi32(a1, a3), b3 = _mm512_unpackhi_epi32(a1, a3);
        __m512i b4 = _mm512_unpacklo_epi32(a4, a6), b5 = _mm512_unpackhi_epi32(a4, a6);
        __m512i b6 = _mm512_unpacklo_epi32(a5, a7), b7 = _mm512_unpackhi_epi32(a5, a7);
        __m512i r[8] = {
            _mm512_unpacklo_epi64(b0, b4), _mm512_unpackhi_epi64(b0, b4), _mm512_unpacklo_epi64(b1, b5), _mm512_unpackhi_epi64(b1, b5),
            _mm512_unpacklo_epi64(b2, b6), _mm512_unpackhi_epi64(b2, b6), _mm512_unpacklo_epi64(b3, b7), _mm512_unpackhi_epi64(b3, b7),
        };
        int16_t *o = turned + (ptrdiff_t)i * strip + j0;
        for (int k = 0; k < 8; k++) {
            _mm_storeu_si128((__m128i *)(o + (ptrdiff_t)k * strip), _mm512_castsi512_si128(r[k]));
            _mm_storeu_si128((__m128i *)(o + (ptrdiff_t)(k + 8) * strip), _mm512_extracti32x4_epi32(r[k], 1));
            _mm_storeu_si128((__m128i *)(o + (ptrdiff_t)(k + 16) * strip), _mm512_extracti32x4_epi32(r[k], 2));
            _mm_storeu_si128((__m128i *)(o + (ptrdiff_t)(k + 24) * strip), _mm512_extracti32x4_epi32(r[k], 3));
        }
    }
}

__attribute__((target("avx512f,avx512bw")))
static void across_group_avx512(const int16_t *widened, ptrdiff_t wrow, const int32_t *pos, const int16_t *coef, int taps,
                                int left, int lo, __m512i *splat, int cols, int16_t *turned, int j0) {
    int first[group];
    for (int j = 0; j < group; j++) {
        int x = j < left ? j : left - 1;
        first[j] = pos[x] - lo;
        for (int t = 0; t < taps; t++) splat[j * taps + t] = _mm512_set1_epi16(coef[(ptrdiff_t)x * taps + t]);
    }
    across_avx512(widened, wrow, first, splat, taps, cols, turned, j0);
}

__attribute__((target("avx512f,avx512bw")))
static int down_avx512(const int16_t *turned, const int16_t *c, int taps, int offset, uint8_t *out, int count) {
    const __m512i start = _mm512_set1_epi16((short)(offset + 16));
    const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
    int i = 0;
    for (; i + 64 <= count; i += 64) {
        __m512i a = start, b = start;
        for (int t = 0; t < taps; t++) {
            const __m512i k = _mm512_set1_epi16(c[t]);
            const int16_t *r = turned + (ptrdiff_t)t * strip + i;
            a = _mm512_add_epi16(a, _mm512_mulhrs_epi16(_mm512_loadu_si512((const void *)r), k));
            b = _mm512_add_epi16(b, _mm512_mulhrs_epi16(_mm512_loadu_si512((const void *)(r + 32)), k));
        }
        const __m512i packed = _mm512_packus_epi16(_mm512_srai_epi16(a, 5), _mm512_srai_epi16(b, 5));
        _mm512_storeu_si512((void *)(out + i), _mm512_permutexvar_epi64(order, packed));
    }
    return i;
}

__attribute__((target("avx2")))
static void down_avx2(const int16_t *turned, const int16_t *c, int taps, int offset, uint8_t *out, int from, int count) {
    const __m256i start = _mm256_set1_epi16((short)(offset + 16));
    int i = from;
    for (; i + 32 <= count; i += 32) {
        __m256i a = start, b = start;
        for (int t = 0; t < taps; t++) {
            const __m256i k = _mm256_set1_epi16(c[t]);
            const int16_t *r = turned + (ptrdiff_t)t * strip + i;
            a = _mm256_add_epi16(a, _mm256_mulhrs_epi16(_mm256_loadu_si256((const __m256i *)r), k));
            b = _mm256_add_epi16(b, _mm256_mulhrs_epi16(_mm256_loadu_si256((const __m256i *)(r + 16)), k));
        }
        const __m256i packed = _mm256_packus_epi16(_mm256_srai_epi16(a, 5), _mm256_srai_epi16(b, 5));
        _mm256_storeu_si256((__m256i *)(out + i), _mm256_permute4x64_epi64(packed, 0xD8));
    }
    down_plain(turned, c, taps, offset, out, i, count);
}
#endif

int avg_scale_turn_simd(void) {
#if AVG_X86
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) return 2;
    return __builtin_cpu_supports("avx2") ? 1 : 0;
#else
    return 0;
#endif
}

int avg_scale_turn_rows(const int32_t *across_pos, int across_count, int across_taps) {
    /* Positions run one way (down or up the stored rows), so a strip's rows lie between its ends. */
    int most = across_taps;
    for (int x = 0; x < across_count; x++) {
        int last = x + strip < across_count ? x + strip - 1 : across_count - 1;
        int span = across_pos[last] - across_pos[x];
        span = span < 0 ? -span : span;
        if (span + across_taps > most) most = span + across_taps;
    }
    return most;
}

size_t avg_scale_turn_scratch(int sw, int pairs, int rows) {
    ptrdiff_t wrow = padded((ptrdiff_t)columns(sw, pairs) * 2);
    /* The widened rows, the turned strip, the splat coefficients (one 512-bit vector per tap of a group). */
    return (size_t)((ptrdiff_t)rows * wrow + (ptrdiff_t)columns(sw, pairs) * strip * 2 + (ptrdiff_t)group * max_taps * 64 + 64);
}

int avg_scale_turn(const uint8_t *src, ptrdiff_t sls, int sw, int pairs,
                   const int32_t *across_pos, const int16_t *across_coef, int across_taps,
                   const int32_t *down_pos, const int16_t *down_coef, int down_taps, int dh, int offset,
                   uint8_t *dst0, uint8_t *dst1, ptrdiff_t dls, int x0, int x1, uint8_t *scratch, int rows, int simd) {
    if (across_taps > max_taps || down_taps > max_taps || x0 >= x1) return x0 >= x1 ? 0 : -1;
#if !AVG_X86
    simd = 0;
#endif
    const int cols = columns(sw, pairs);
    const ptrdiff_t wrow = padded((ptrdiff_t)cols * 2) / 2;
    int16_t *widened = (int16_t *)scratch;
    int16_t *turned = widened + (ptrdiff_t)rows * wrow;
    uint8_t *coefficients = (uint8_t *)(turned + (ptrdiff_t)cols * strip);
    coefficients += (64 - ((uintptr_t)coefficients & 63)) & 63;
    for (int xs = x0; xs < x1; xs += strip) {
        const int n = x1 - xs < strip ? x1 - xs : strip;
        const int last = xs + n - 1;
        const int lo = across_pos[xs] < across_pos[last] ? across_pos[xs] : across_pos[last];
        const int hi = (across_pos[xs] < across_pos[last] ? across_pos[last] : across_pos[xs]) + across_taps;
        for (int r = lo; r < hi; r++) {
            const uint8_t *row = src + (ptrdiff_t)r * sls;
#if AVG_X86
            /* The stored picture comes from memory once (a mapped file, a decoder's buffer): ask
             * for the rows a few ahead while this one is widened. */
            if (r + ahead < hi) {
                const uint8_t *next = src + (ptrdiff_t)(r + ahead) * sls;
                for (int b = 0; b < (pairs ? 2 * sw : sw); b += 64) _mm_prefetch((const char *)(next + b), _MM_HINT_T0);
            }
#endif
            int16_t *w = widened + (ptrdiff_t)(r - lo) * wrow;
#if AVG_X86
            if (simd) { widen_avx2(row, sw, pairs, w); continue; }
#endif
            widen_plain(row, sw, pairs, w, 0);
        }
        for (int j0 = 0; j0 < n; j0 += group) {
#if AVG_X86
            if (simd >= 2) {
                across_group_avx512(widened, wrow, across_pos + xs + j0, across_coef + (ptrdiff_t)(xs + j0) * across_taps, across_taps,
                                    x1 - xs - j0, lo, (__m512i *)coefficients, cols, turned, j0);
                continue;
            }
            if (simd) {
                across_group_avx2(widened, wrow, across_pos + xs + j0, across_coef + (ptrdiff_t)(xs + j0) * across_taps, across_taps,
                                  x1 - xs - j0, lo, (__m256i *)coefficients, cols, turned, j0);
                continue;
            }
#endif
            for (int j = j0; j < j0 + group && j < n; j++) {
                int x = xs + j;
                across_plain(widened + (ptrdiff_t)(across_pos[x] - lo) * wrow, wrow, across_coef + (ptrdiff_t)x * across_taps,
                             across_taps, cols, turned, j);
            }
        }
        for (int half = 0; half < (pairs ? 2 : 1); half++) {
            uint8_t *dst = half ? dst1 : dst0;
            const int16_t *plane = turned + (ptrdiff_t)(half ? sw : 0) * strip;
            for (int y = 0; y < dh; y++) {
                const int16_t *in = plane + (ptrdiff_t)down_pos[y] * strip;
                const int16_t *c = down_coef + (ptrdiff_t)y * down_taps;
                uint8_t *out = dst + (ptrdiff_t)y * dls + xs;
#if AVG_X86
                if (simd) {
                    down_avx2(in, c, down_taps, offset, out, simd >= 2 ? down_avx512(in, c, down_taps, offset, out, n) : 0, n);
                    continue;
                }
#endif
                down_plain(in, c, down_taps, offset, out, 0, n);
            }
        }
    }
    return 0;
}

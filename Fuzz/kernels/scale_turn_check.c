/* Random geometries and filters through every path of avg_scale_turn (plain C, AVX2, AVX-512BW as
 * far as this CPU goes), built with AddressSanitizer and UBSan by scripts/kernel-check: a read or
 * write outside the caller's buffers stops it, and the paths must give the same bytes, extreme
 * coefficients (sums that wrap) included. Filters keep the kernel's contract: positions run one
 * way and every window lies inside the input. */
#include "kernels.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int between(int a, int b) { return a + rand() % (b - a + 1); }

static void make_filter(int in, int out, int taps, int mirrored, int32_t *pos, int16_t *coef) {
    for (int k = 0; k < out; k++) {
        double centre = (k + 0.5) * in / (double)out - 0.5;
        if (mirrored) centre = in - 1 - centre;
        int p = (int)centre - taps / 2 + 1;
        p = p < 0 ? 0 : p > in - taps ? in - taps : p;
        pos[k] = p;
        int sum = 0;
        for (int t = 0; t < taps; t++) {
            int v = t == taps - 1 ? 16384 - sum : between(-3000, 9000);
            sum += v;
            coef[k * taps + t] = (int16_t)v;
        }
    }
}

int main(int argc, char **argv) {
    int iterations = argc > 1 ? atoi(argv[1]) : 1000;
    srand(argc > 2 ? (unsigned)atoi(argv[2]) : 7u);
    int widest = avg_scale_turn_simd();
    for (int it = 0; it < iterations; it++) {
        int pairs = rand() % 2, sw = between(8, 400), sh = between(8, 400), dw = between(1, 300), dh = between(1, 300);
        int across_taps = between(1, sh < 40 ? sh : 40), down_taps = between(1, sw < 40 ? sw : 40);
        int32_t *ap = malloc(sizeof *ap * dw), *dp = malloc(sizeof *dp * dh);
        int16_t *ac = malloc(sizeof *ac * dw * across_taps), *dc = malloc(sizeof *dc * dh * down_taps);
        make_filter(sh, dw, across_taps, rand() % 2, ap, ac);
        make_filter(sw, dh, down_taps, rand() % 2, dp, dc);
        int rows = avg_scale_turn_rows(ap, dw, across_taps);
        size_t scratch_bytes = avg_scale_turn_scratch(sw, pairs, rows);
        ptrdiff_t sls = (ptrdiff_t)sw * (pairs ? 2 : 1) + between(0, 3), dls = dw + between(0, 3);
        uint8_t *src = malloc((size_t)(sls * sh));
        for (ptrdiff_t i = 0; i < sls * sh; i++) src[i] = (uint8_t)rand();
        int x0 = between(0, dw - 1), x1 = between(x0 + 1, dw), offset = between(-2000, 2000);
        uint8_t *out[3][2] = {{0}};
        for (int level = 0; level <= widest; level++) {
            for (int p = 0; p < 2; p++) {
                out[level][p] = malloc((size_t)(dls * dh));
                memset(out[level][p], 7, (size_t)(dls * dh));
            }
            uint8_t *scratch = malloc(scratch_bytes);
            if (avg_scale_turn(src, sls, sw, pairs, ap, ac, across_taps, dp, dc, down_taps, dh, offset,
                               out[level][0], pairs ? out[level][1] : NULL, dls, x0, x1, scratch, rows, level)) {
                printf("iteration %d: refused a filter within the limits\n", it);
                return 1;
            }
            free(scratch);
        }
        for (int level = 1; level <= widest; level++) {
            for (int p = 0; p < (pairs ? 2 : 1); p++) {
                if (memcmp(out[0][p], out[level][p], (size_t)(dls * dh))) {
                    printf("iteration %d: path %d differs from plain C in plane %d (%dx%d%s to %dx%d, taps %d/%d, columns %d..%d)\n",
                           it, level, p, sw, sh, pairs ? " pairs" : "", dw, dh, across_taps, down_taps, x0, x1);
                    return 1;
                }
            }
        }
        for (int level = 0; level <= widest; level++) { free(out[level][0]); free(out[level][1]); }
        free(src); free(ap); free(dp); free(ac); free(dc);
    }
    printf("scale_turn: %d random geometries, paths 0..%d agree\n", iterations, widest);
    return 0;
}

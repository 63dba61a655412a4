/*
 * Compiled COCO matching (module aegis_eval.metrics._cmatch, beside coco.py and matching.py, whose NumPy code defines
 * every result: the same numbers, bit for bit, as AEGIS_KERNELS=numpy gives; tests/eval/metrics/test_cmatch*.py
 * compare both on random and adversarial inputs).
 *
 * image_order: the detections grouped by image in descending score order, ties in input order (evaluate_images'
 *   lexsort, match_at_threshold's argsorts) and the accumulation order (evaluate_images' stable argsort): two stable
 *   counting sorts by image around one stable radix sort by score, no comparison sort.
 * evaluate: evaluate_images after that order. Per image, the candidate (detection, GT) pairs whose IoU reaches the
 *   lowest threshold (candidate_pairs' float operations, so the same IoU bits; only GT left of a detection's right
 *   edge are tried), then pycocotools' greedy choice for every area range and all IoU thresholds at once (bit masks),
 *   the ignored flags and the regular GT counts, written straight into the ApTable's arrays.
 * threshold_match: match_at_threshold's greedy pass at one IoU and its per-image counts.
 * precision: accumulate's precision_at_recall for every area range and threshold of an ApTable.
 * Every loop runs without the GIL; each entry point's comment gives its arguments (C-contiguous, native-endian).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

typedef struct {
    int64_t g; /* GT index (into the gt arrays) */
    double iou;
    uint64_t reach; /* evaluate: bit t set when iou >= threshold t */
} Cand;

/* evaluate's ranking of one detection's candidates in an area range: x before y when x is regular and y ignored,
 * else when x has the higher IoU, else when x comes later. worse(y, x): y ranks after x. */
static int worse(const Cand *y, const Cand *x, const uint8_t *ig) {
    if (ig[y->g] != ig[x->g]) return ig[y->g] > ig[x->g];
    if (y->iou != x->iou) return y->iou < x->iou;
    return y->g < x->g;
}

static Py_ssize_t lowest_bit(uint64_t bits) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(bits);
#else
    Py_ssize_t t = 0;
    while (!(bits & 1)) {
        bits >>= 1;
        t++;
    }
    return t;
#endif
}

static int get(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t bytes, const char *name) {
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS) < 0) return 0;
    if (view->len != bytes) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd bytes, got %zd", name, bytes, view->len);
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

/* len[k] = the byte length of objs[which[k]]'s C-contiguous buffer, for k < n: the sizes every entry point derives
 * from the arrays it is given. -1 with the exception set when one has no such buffer. */
static int byte_lengths(PyObject **objs, const int *which, int n, Py_ssize_t *len) {
    for (int k = 0; k < n; k++) {
        Py_buffer probe;
        if (PyObject_GetBuffer(objs[which[k]], &probe, PyBUF_C_CONTIGUOUS) < 0) return -1;
        len[k] = probe.len;
        PyBuffer_Release(&probe);
    }
    return 0;
}

/* Transposes the 64 x 64 bit matrix a: afterwards bit r of a[c] is what bit c of a[r] was. Swaps the off-diagonal
 * blocks of halves, then of quarters, down to single bits. */
static void transpose64(uint64_t *a) {
    uint64_t m = 0x00000000FFFFFFFFULL;
    for (int j = 32; j; j >>= 1, m ^= m << j) {
        for (int k = 0; k < 64; k = ((k | j) + 1) & ~j) {
            const uint64_t t = ((a[k] >> j) ^ a[k | j]) & m;
            a[k | j] ^= t;
            a[k] ^= t << j;
        }
    }
}

static inline int popcount64(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_popcountll(x); /* one instruction in precision_by_bits' popcnt clone */
#else
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
    return (int)((x * 0x0101010101010101ULL) >> 56);
#endif
}

/* x86-64 Linux with GCC: a second build of the bit walk using the popcnt instruction, chosen at load time where the
 * CPU has it (integer counts: the same numbers either way). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define POPCNT_CLONES __attribute__((target_clones("popcnt", "default")))
#else
#define POPCNT_CLONES
#endif

/* Bits of 64 flags (fewer at the end, the rest 0): tp bit q = m[q] != 0 && g[q] == 0, fp bit q = both 0. */
static void flag_bits(const uint8_t *m, const uint8_t *g, Py_ssize_t n, uint64_t *tp, uint64_t *fp) {
    uint64_t t = 0, f = 0;
    Py_ssize_t q = 0;
#ifdef __SSE2__
    const __m128i zero = _mm_setzero_si128();
    for (; q + 16 <= n; q += 16) {
        const __m128i mz = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(m + q)), zero);
        const __m128i gz = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(g + q)), zero);
        t |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_andnot_si128(mz, gz)) << q;
        f |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_and_si128(mz, gz)) << q;
    }
#endif
    for (; q < n; q++) {
        t |= (uint64_t)(m[q] != 0 && g[q] == 0) << q;
        f |= (uint64_t)(m[q] == 0 && g[q] == 0) << q;
    }
    *tp = t;
    *fp = f;
}

/* The largest of x[0..n) (n >= 1, no NaN): "a > b ? a : b" is SSE2's maxpd(a, b). */
static double max_of(const double *x, Py_ssize_t n) {
    double top = x[0];
    Py_ssize_t q = 1;
#ifdef __SSE2__
    if (n >= 5) {
        __m128d m0 = _mm_loadu_pd(x + 1), m1 = _mm_loadu_pd(x + 3);
        for (q = 5; q + 4 <= n; q += 4) {
            m0 = _mm_max_pd(m0, _mm_loadu_pd(x + q));
            m1 = _mm_max_pd(m1, _mm_loadu_pd(x + q + 2));
        }
        double two[2];
        _mm_storeu_pd(two, _mm_max_pd(m0, m1));
        top = top > two[0] ? top : two[0];
        top = top > two[1] ? top : two[1];
    }
#endif
    for (; q < n; q++) top = top > x[q] ? top : x[q];
    return top;
}

/* py_precision's loop for A * T <= 64 lanes (area range, threshold), the same numbers: the true / false positive
 * flags become one bit per lane and detection (64 x 64 bit transposes), are taken in the order ``rows`` once for all
 * lanes, and are transposed back to 64 positions of one lane per word; a lane's walk then visits its true positives
 * only, the false positives before each counted from the bits. det_bits holds 2 * 64 * ceil(D / 64) words,
 * lane_bits 2 * L * ceil(N / 64), pr N. */
POPCNT_CLONES static void precision_by_bits(const uint8_t *matched, const uint8_t *ignored, const int64_t *rows,
                              const int64_t *n_pos, const double *rthr, double *out, Py_ssize_t A, Py_ssize_t T,
                              Py_ssize_t R, Py_ssize_t D, Py_ssize_t N, uint64_t *det_bits, uint64_t *lane_bits,
                              double *pr, Py_ssize_t *at) {
    const Py_ssize_t L = A * T, DW = (D + 63) / 64, NW = (N + 63) / 64;
    uint64_t *det_tp = det_bits, *det_fp = det_bits + 64 * DW, *lane_tp = lane_bits, *lane_fp = lane_bits + L * NW;
    uint64_t bt[64], bf[64];
    for (Py_ssize_t w = 0; w < DW; w++) { /* per detection: its lanes' flags */
        const Py_ssize_t r0 = 64 * w, n = D - r0 < 64 ? D - r0 : 64;
        memset(bt, 0, sizeof bt);
        memset(bf, 0, sizeof bf);
        for (Py_ssize_t j = 0; j < L; j++) flag_bits(matched + j * D + r0, ignored + j * D + r0, n, &bt[j], &bf[j]);
        transpose64(bt);
        transpose64(bf);
        memcpy(det_tp + r0, bt, sizeof bt);
        memcpy(det_fp + r0, bf, sizeof bf);
    }
    for (Py_ssize_t w = 0; w < NW; w++) { /* in accumulation order, per lane */
        const Py_ssize_t k0 = 64 * w, n = N - k0 < 64 ? N - k0 : 64;
        for (Py_ssize_t q = 0; q < 64; q++) {
            bt[q] = q < n ? det_tp[rows[k0 + q]] : 0;
            bf[q] = q < n ? det_fp[rows[k0 + q]] : 0;
        }
        transpose64(bt);
        transpose64(bf);
        for (Py_ssize_t j = 0; j < L; j++) {
            lane_tp[j * NW + w] = bt[j];
            lane_fp[j * NW + w] = bf[j];
        }
    }
    const double eps = 2.220446049250313e-16; /* np.spacing(1) */
    for (Py_ssize_t j = 0; j < L; j++) {
        const Py_ssize_t a = j / T;
        if (n_pos[a] == 0) continue;
        const double npos = (double)n_pos[a];
        Py_ssize_t tp = 0, fp = 0;
        for (Py_ssize_t w = 0; w < NW; w++) {
            const uint64_t fw = lane_fp[j * NW + w];
            for (uint64_t tw = lane_tp[j * NW + w]; tw; tw &= tw - 1) {
                const Py_ssize_t b = lowest_bit(tw);
                const Py_ssize_t fp_before = fp + popcount64(fw & ((((uint64_t)1) << b) - 1));
                tp++;
                const double tps = (double)tp;
                pr[tp - 1] = tps / ((double)fp_before + tps + eps);
            }
            fp += popcount64(fw);
        }
        /* The envelope (precision made monotone from the right) is read only where each recall threshold is first
         * reached (at[r], searchsorted(rc, thresholds, 'left') with rc[k] = (k + 1) / n_pos; thresholds rise): the
         * maximum of pr from there on, gathered from the right segment by segment (max is exact in any order). */
        Py_ssize_t k = 0;
        for (Py_ssize_t r = 0; r < R; r++) {
            while (k < tp && (double)(k + 1) / npos < rthr[r]) k++;
            at[r] = k;
        }
        double *q = out + j * R, top = 0.0; /* every pr is > 0 */
        Py_ssize_t hi = tp;
        for (Py_ssize_t r = R - 1; r >= 0; r--) {
            if (at[r] >= tp) continue;
            const double seg = max_of(pr + at[r], hi - at[r]);
            top = seg > top ? seg : top;
            hi = at[r];
            q[r] = top;
        }
    }
}

/* precision(matched, ignored, rows, n_pos, recall_thresholds, out) -> None
 *
 * coco.py's precision_at_recall for every area range and IoU threshold of an ApTable: detections visited in the
 * accumulation order ``rows``; at each true positive k (1-based) recall k / n_pos and precision k / ((fp + k) + eps),
 * fp the false positives before it, exactly the NumPy expressions; the precision made monotone from the right and
 * read at the first true positive whose recall reaches each recall threshold (0 where none does). matched, ignored
 * (A, T, D) uint8; rows (N) int64 in [0, D); n_pos (A) int64 (an area range with 0 is left as it is); recall
 * thresholds (R) float64; out (A, T, R) float64, zero on entry. */
static PyObject *py_precision(PyObject *self, PyObject *args) {
    PyObject *o[6];
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5])) return NULL;
    static const int sized[] = {2, 3, 4, 5, 0};  /* the arrays whose lengths give the sizes */
    Py_ssize_t len[5];
    if (byte_lengths(o, sized, 5, len) < 0) return NULL;
    Py_ssize_t N = len[0] / 8;
    Py_ssize_t A = len[1] / 8;
    Py_ssize_t R = len[2] / 8;
    Py_ssize_t T = (A && R) ? len[3] / 8 / (A * R) : 0;
    Py_ssize_t D = (A && T) ? len[4] / (A * T) : 0;
    if (A <= 0 || T <= 0 || R <= 0) {
        PyErr_SetString(PyExc_ValueError, "precision: empty area ranges, thresholds or recall thresholds");
        return NULL;
    }
    const Py_ssize_t bytes[6] = {A * T * D, A * T * D, N * 8, A * 8, R * 8, A * T * R * 8};
    static const char *const names[6] = {"matched", "ignored", "rows", "n_pos", "recall_thresholds", "out"};
    Py_buffer v[6];
    int got = 0;
    PyObject *result = NULL;
    double *rc = NULL, *pr = NULL;
    uint64_t *det_bits = NULL, *lane_bits = NULL;
    Py_ssize_t *at = NULL;
    for (; got < 6; got++) {
        if (!get(o[got], &v[got], got == 5, bytes[got], names[got])) goto done;
    }
    {
        const uint8_t *matched = v[0].buf, *ignored = v[1].buf;
        const int64_t *rows = v[2].buf, *n_pos = v[3].buf;
        const double *rthr = v[4].buf;
        double *out = v[5].buf;
        for (Py_ssize_t k = 0; k < N; k++) {
            if (rows[k] < 0 || rows[k] >= D) {
                PyErr_SetString(PyExc_ValueError, "precision: rows outside the detections");
                goto done;
            }
        }
        rc = PyMem_Malloc((size_t)(N + 1) * sizeof(double));
        pr = PyMem_Malloc((size_t)(N + 1) * sizeof(double));
        const Py_ssize_t L = A * T, DW = (D + 63) / 64, NW = (N + 63) / 64;
        const int by_bits = L <= 64;
        if (by_bits) {
            det_bits = PyMem_Malloc(sizeof(uint64_t) * 2 * (size_t)(64 * DW + 1));
            lane_bits = PyMem_Malloc(sizeof(uint64_t) * 2 * (size_t)(L * NW + 1));
            at = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(R + 1));
        }
        if (!rc || !pr || (by_bits && (!det_bits || !lane_bits || !at))) {
            PyErr_NoMemory();
            goto done;
        }
        const double eps = 2.220446049250313e-16; /* np.spacing(1) */
        Py_BEGIN_ALLOW_THREADS;
        if (by_bits) {
            precision_by_bits(matched, ignored, rows, n_pos, rthr, out, A, T, R, D, N, det_bits, lane_bits, pr, at);
        }
        for (Py_ssize_t a = 0; a < A && !by_bits; a++) {
            if (n_pos[a] == 0) continue;
            const double npos = (double)n_pos[a];
            for (Py_ssize_t t = 0; t < T; t++) {
                const uint8_t *m = matched + (a * T + t) * D, *ig = ignored + (a * T + t) * D;
                Py_ssize_t tp = 0, fp = 0;
                for (Py_ssize_t k = 0; k < N; k++) {
                    const int64_t r = rows[k];
                    if (ig[r]) continue;
                    if (m[r]) {
                        tp++;
                        const double tps = (double)tp;
                        rc[tp - 1] = tps / npos;
                        pr[tp - 1] = tps / ((double)fp + tps + eps);
                    } else {
                        fp++;
                    }
                }
                for (Py_ssize_t k = tp - 1; k > 0; k--) {
                    if (pr[k] > pr[k - 1]) pr[k - 1] = pr[k];
                }
                double *q = out + (a * T + t) * R;
                Py_ssize_t k = 0;
                for (Py_ssize_t j = 0; j < R; j++) { /* searchsorted(rc, thresholds, 'left'): rc and thresholds rise */
                    while (k < tp && rc[k] < rthr[j]) k++;
                    if (k < tp) q[j] = pr[k];
                }
            }
        }
        Py_END_ALLOW_THREADS;
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(rc);
    PyMem_Free(pr);
    PyMem_Free(det_bits);
    PyMem_Free(lane_bits);
    PyMem_Free(at);
    for (int k = 0; k < got; k++) PyBuffer_Release(&v[k]);
    return result;
}

/* Asks for the boxes of the next image's n detections (rows into boxes) while this image is worked on: they lie
 * scattered in the caller's array and would otherwise be waited for one by one. */
static void prefetch_boxes(const double *boxes, const int64_t *rows, Py_ssize_t n) {
#if defined(__GNUC__) || defined(__clang__)
    for (Py_ssize_t k = 0; k < n; k++) __builtin_prefetch(boxes + 4 * rows[k]);
#else
    (void)boxes, (void)rows, (void)n;
#endif
}

/* How many of x[0..n) are < v (pair_scan's prefix: the GT left of a detection's right edge). */
static Py_ssize_t count_below(const double *x, Py_ssize_t n, double v) {
    Py_ssize_t q = 0, c = 0;
#ifdef __SSE2__
    const __m128d vv = _mm_set1_pd(v);
    for (; q + 2 <= n; q += 2) {
        const int bits = _mm_movemask_pd(_mm_cmplt_pd(_mm_loadu_pd(x + q), vv));
        c += (bits & 1) + (bits >> 1);
    }
#endif
    for (; q < n; q++) c += x[q] < v;
    return c;
}

/* One image's GT (indices order[0..n)) as corner and area columns (candidate_pairs' sums; gcf 1.0 for crowd), stored
 * by left edge with an insertion sort, pos[q] the loaded position of the GT stored at q. A NaN edge has no place in
 * that order: from it on the GT are stored as they come, and 0 is returned (the callers then scan every GT of the
 * image); 1 when the columns are sorted by left edge. */
static int image_gt_by_left(const int64_t *order, Py_ssize_t n, const double *gb, const uint8_t *crowd, double *gx0,
                            double *gy0, double *gx1, double *gy1, double *ga, double *gcf, Py_ssize_t *pos) {
    int by_left = 1;
    for (Py_ssize_t j = 0; j < n; j++) {
        const int64_t g = order[j];
        const double *b = gb + 4 * g;
        Py_ssize_t q = j;
        if (b[0] != b[0]) by_left = 0;
        while (by_left && q > 0 && gx0[q - 1] > b[0]) {
            gx0[q] = gx0[q - 1], gy0[q] = gy0[q - 1], gx1[q] = gx1[q - 1], gy1[q] = gy1[q - 1];
            ga[q] = ga[q - 1], gcf[q] = gcf[q - 1], pos[q] = pos[q - 1];
            q--;
        }
        gx0[q] = b[0];
        gy0[q] = b[1];
        gx1[q] = b[2] + b[0];
        gy1[q] = b[3] + b[1];
        ga[q] = b[2] * b[3];
        gcf[q] = crowd[g] ? 1.0 : 0.0;
        pos[q] = j;
    }
    return by_left;
}

/* evaluate's IoU of one detection (corners dx0, dy0, dx1, dy1, area da) with the first n GT of an image (corner and
 * area columns, gcf 1.0 for crowd): iou[q], and bit q of ok (words of 64, zeroed first) set where w > 0, h > 0 and
 * iou >= floor_iou, so the callers visit the few candidates only. candidate_pairs'
 * operations: min and max as "a < b ? a : b" and "a > b ? a : b" (what SSE2's minpd(a, b) and maxpd(a, b) compute,
 * NaN included), then w * h, the union, one division; two pairs at a time where SSE2 is there. */
static void pair_scan(double dx0, double dy0, double dx1, double dy1, double da, const double *gx0, const double *gy0,
                      const double *gx1, const double *gy1, const double *ga, const double *gcf, double floor_iou,
                      Py_ssize_t n, double *iou, uint64_t *ok) {
    Py_ssize_t q = 0;
    memset(ok, 0, sizeof(uint64_t) * (size_t)((n + 63) / 64));
#ifdef __SSE2__
    const __m128d vdx0 = _mm_set1_pd(dx0), vdy0 = _mm_set1_pd(dy0), vdx1 = _mm_set1_pd(dx1), vdy1 = _mm_set1_pd(dy1);
    const __m128d vda = _mm_set1_pd(da), zero = _mm_setzero_pd(), vfloor = _mm_set1_pd(floor_iou);
    for (; q + 2 <= n; q += 2) {
        const __m128d w = _mm_sub_pd(_mm_min_pd(vdx1, _mm_loadu_pd(gx1 + q)), _mm_max_pd(vdx0, _mm_loadu_pd(gx0 + q)));
        const __m128d h = _mm_sub_pd(_mm_min_pd(vdy1, _mm_loadu_pd(gy1 + q)), _mm_max_pd(vdy0, _mm_loadu_pd(gy0 + q)));
        const __m128d inter = _mm_mul_pd(w, h);
        const __m128d is_crowd = _mm_cmpneq_pd(_mm_loadu_pd(gcf + q), zero);
        const __m128d regular = _mm_sub_pd(_mm_add_pd(vda, _mm_loadu_pd(ga + q)), inter);
        const __m128d uni = _mm_or_pd(_mm_and_pd(is_crowd, vda), _mm_andnot_pd(is_crowd, regular));
        const __m128d v = _mm_div_pd(inter, uni);
        const int bits = _mm_movemask_pd(
            _mm_and_pd(_mm_and_pd(_mm_cmpgt_pd(w, zero), _mm_cmpgt_pd(h, zero)), _mm_cmpge_pd(v, vfloor)));
        _mm_storeu_pd(iou + q, v);
        ok[q >> 6] |= (uint64_t)bits << (q & 63); /* q even: both bits in one word */
    }
#endif
    for (; q < n; q++) {
        const double w = (dx1 < gx1[q] ? dx1 : gx1[q]) - (dx0 > gx0[q] ? dx0 : gx0[q]);
        const double h = (dy1 < gy1[q] ? dy1 : gy1[q]) - (dy0 > gy0[q] ? dy0 : gy0[q]);
        const double inter = w * h;
        const double uni = gcf[q] != 0.0 ? da : da + ga[q] - inter;
        iou[q] = inter / uni;
        ok[q >> 6] |= (uint64_t)(w > 0 && h > 0 && iou[q] >= floor_iou) << (q & 63);
    }
}

/* ---- the per-image score order (evaluate_images' lexsort and argsort, match_at_threshold's argsorts) ---- */

/* A uint64 whose ascending order is the descending order of the double x (finite or infinite; -0.0 ties +0.0,
 * as in argsort). */
static uint64_t descending_key(double x) {
    if (x == 0.0) x = 0.0;
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    u = (u >> 63) ? ~u : (u | 0x8000000000000000ULL);
    return ~u;
}

enum { RADIX_BITS = 11, RADIX_BUCKETS = 1 << RADIX_BITS, RADIX_PASSES = (64 + RADIX_BITS - 1) / RADIX_BITS };

/* Stable LSD radix sort of n (key, val) pairs by key; key2, val2 are scratch of n, hist of RADIX_PASSES *
 * RADIX_BUCKETS. The sorted pairs end in key / val. Digits every key shares cost one counting pass, no scatter. */
static void radix_sort(uint64_t *key, int64_t *val, uint64_t *key2, int64_t *val2, Py_ssize_t *hist, Py_ssize_t n) {
    memset(hist, 0, sizeof(Py_ssize_t) * RADIX_PASSES * RADIX_BUCKETS);
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint64_t k = key[i];
        for (int p = 0; p < RADIX_PASSES; p++) {
            hist[p * RADIX_BUCKETS + ((k >> (p * RADIX_BITS)) & (RADIX_BUCKETS - 1))]++;
        }
    }
    uint64_t *ks = key, *kd = key2;
    int64_t *vs = val, *vd = val2;
    for (int p = 0; p < RADIX_PASSES; p++) {
        Py_ssize_t *h = hist + p * RADIX_BUCKETS;
        if (n == 0 || h[(ks[0] >> (p * RADIX_BITS)) & (RADIX_BUCKETS - 1)] == n) continue;
        Py_ssize_t sum = 0;
        for (int b = 0; b < RADIX_BUCKETS; b++) {
            const Py_ssize_t c = h[b];
            h[b] = sum;
            sum += c;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            const Py_ssize_t at = h[(ks[i] >> (p * RADIX_BITS)) & (RADIX_BUCKETS - 1)]++;
            kd[at] = ks[i];
            vd[at] = vs[i];
        }
        uint64_t *kt = ks;
        ks = kd;
        kd = kt;
        int64_t *vt = vs;
        vs = vd;
        vd = vt;
    }
    if (ks != key) {
        memcpy(key, ks, sizeof(uint64_t) * (size_t)n);
        memcpy(val, vs, sizeof(int64_t) * (size_t)n);
    }
}

/* image_order(det_image, scores, min_score, max_dets, by_image, start, image_of, rank, order) -> int
 *
 * The rows with scores >= min_score, grouped by image row in descending score order (ties in row order: the
 * reference's stable sort), each image cut to its first max_dets; returns their count K. by_image (N) int64: the K
 * rows first; start (I + 1) int64: each image's offset into them; image_of, rank (N) int64 (or both None): the image
 * row and the position in it of each of the K; order (N) int64 or None: the K positions in descending score order,
 * ties in position order (argsort(-scores[by_image[:K]], kind="stable")). det_image (N) int64 rows in [0, I).
 * Two stable counting sorts by image around one radix sort by score: (image, score, row), no comparison sort. */
static PyObject *py_image_order(PyObject *self, PyObject *args) {
    PyObject *o[7];
    double min_score;
    long long max_dets;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOdLOOOOO", &o[0], &o[1], &min_score, &max_dets, &o[2], &o[3], &o[4], &o[5], &o[6]))
        return NULL;
    const int want_order = o[6] != Py_None, want_place = o[4] != Py_None && o[5] != Py_None;
    static const int sized[] = {0, 3};
    Py_ssize_t len[2];
    if (byte_lengths(o, sized, 2, len) < 0) return NULL;
    const Py_ssize_t N = len[0] / 8, I = len[1] / 8 - 1;
    if (I < 0 || max_dets < 1) {
        PyErr_SetString(PyExc_ValueError, "image_order: empty image table or max_dets < 1");
        return NULL;
    }
    const Py_ssize_t bytes[7] = {N * 8, N * 8, N * 8, (I + 1) * 8, N * 8, N * 8, N * 8};
    static const char *const names[7] = {"det_image", "scores", "by_image", "start", "image_of", "rank", "order"};
    Py_buffer v[7];
    int got = 0, held[7] = {0};
    PyObject *result = NULL;
    int64_t *rows = NULL, *rows2 = NULL, *count = NULL, *kept_at = NULL;
    uint64_t *key = NULL, *key2 = NULL;
    Py_ssize_t *hist = NULL;
    for (; got < 7; got++) {
        if ((got == 6 && !want_order) || ((got == 4 || got == 5) && !want_place)) continue;
        if (!get(o[got], &v[got], got >= 2, bytes[got], names[got])) goto done;
        held[got] = 1;
    }
    {
        const int64_t *img = v[0].buf;
        const double *sc = v[1].buf;
        int64_t *by_image = v[2].buf, *start = v[3].buf;
        int64_t *image_of = want_place ? v[4].buf : NULL, *rank = want_place ? v[5].buf : NULL;
        int64_t *order = want_order ? v[6].buf : NULL;
        for (Py_ssize_t r = 0; r < N; r++) {
            if (img[r] < 0 || img[r] >= I) {
                PyErr_SetString(PyExc_ValueError, "image_order: det_image outside [0, I)");
                goto done;
            }
        }
        rows = PyMem_Malloc(sizeof(int64_t) * (size_t)(N + 1));
        rows2 = PyMem_Malloc(sizeof(int64_t) * (size_t)(N + 1));
        key = PyMem_Malloc(sizeof(uint64_t) * (size_t)(N + 1));
        key2 = PyMem_Malloc(sizeof(uint64_t) * (size_t)(N + 1));
        count = PyMem_Malloc(sizeof(int64_t) * (size_t)(I + 1));
        hist = PyMem_Malloc(sizeof(Py_ssize_t) * RADIX_PASSES * RADIX_BUCKETS);
        kept_at = want_order ? PyMem_Malloc(sizeof(int64_t) * (size_t)(N + 1)) : NULL;
        if (!rows || !rows2 || !key || !key2 || !count || !hist || (want_order && !kept_at)) {
            PyErr_NoMemory();
            goto done;
        }
        Py_ssize_t K = 0;
        Py_BEGIN_ALLOW_THREADS;
        /* 1. the rows that pass, stably by image (counting sort) */
        memset(count, 0, sizeof(int64_t) * (size_t)(I + 1));
        Py_ssize_t n = 0;
        for (Py_ssize_t r = 0; r < N; r++) {
            if (sc[r] >= min_score) {
                count[img[r] + 1]++;
                n++;
            }
        }
        for (Py_ssize_t i = 0; i < I; i++) count[i + 1] += count[i];
        for (Py_ssize_t r = 0; r < N; r++) {
            if (sc[r] >= min_score) rows2[count[img[r]]++] = r;
        }
        /* 2. stably by descending score: (score, image, row) */
        for (Py_ssize_t k = 0; k < n; k++) key[k] = descending_key(sc[rows2[k]]);
        radix_sort(key, rows2, key2, rows, hist, n);
        /* 3. stably by image again: (image, score, row), each image cut to max_dets */
        memset(count, 0, sizeof(int64_t) * (size_t)(I + 1));
        for (Py_ssize_t k = 0; k < n; k++) count[img[rows2[k]] + 1]++;
        for (Py_ssize_t i = 0; i < I; i++) count[i + 1] += count[i];
        for (Py_ssize_t k = 0; k < n; k++) rows[count[img[rows2[k]]]++] = rows2[k];
        /* count[i] is now the end of image i in rows, count[i - 1] its start */
        Py_ssize_t from = 0;
        for (Py_ssize_t i = 0; i < I; i++) {
            const Py_ssize_t end = count[i], take = end - from < max_dets ? end - from : (Py_ssize_t)max_dets;
            start[i] = K;
            memcpy(by_image + K, rows + from, sizeof(int64_t) * (size_t)take);
            for (Py_ssize_t q = 0; q < take && want_place; q++) {
                image_of[K + q] = i;
                rank[K + q] = q;
            }
            K += take;
            from = end;
        }
        start[I] = K;
        if (want_order) {
            for (Py_ssize_t r = 0; r < N; r++) kept_at[r] = -1;
            for (Py_ssize_t k = 0; k < K; k++) kept_at[by_image[k]] = k;
            Py_ssize_t m = 0;
            for (Py_ssize_t k = 0; k < n; k++) {
                const int64_t at = kept_at[rows2[k]];
                if (at >= 0) order[m++] = at;
            }
        }
        Py_END_ALLOW_THREADS;
        result = PyLong_FromSsize_t(K);
    }
done:
    PyMem_Free(rows);
    PyMem_Free(rows2);
    PyMem_Free(key);
    PyMem_Free(key2);
    PyMem_Free(count);
    PyMem_Free(hist);
    PyMem_Free(kept_at);
    for (int k = 0; k < 7; k++) {
        if (held[k]) PyBuffer_Release(&v[k]);
    }
    return result;
}

/* evaluate's optional threshold match (match_at_threshold's greedy pass and counts, as threshold_match computes them)
 * on the candidates evaluate found: the same pairs, since iou >= floor. */
typedef struct {
    const double *scores, *garea;
    double score, iou, small_max, medium_max;
    int64_t *det_gt, *gt_det, *counts;
    double *det_iou, *gt_iou;
    uint8_t *crowd_hit, *taken;
    Py_ssize_t I;
} AtThreshold;

/* The checks evaluate and threshold_match (fn) make of their layout: det_start (I + 1) offsets from 0 to D into rows
 * (D; rows_name in the message), each an index of the N boxes, and each GT's image in [0, I). Returns the most
 * detections of one image, or -1 with the error set. */
static Py_ssize_t check_layout(const char *fn, const char *rows_name, const int64_t *ds, Py_ssize_t I,
                               const int64_t *rows, Py_ssize_t D, Py_ssize_t N, const int64_t *gimg, Py_ssize_t G) {
    if (ds[0] != 0 || ds[I] != D) {
        PyErr_Format(PyExc_ValueError, "%s: det_start does not cover %s", fn, rows_name);
        return -1;
    }
    Py_ssize_t max_d = 0;
    for (Py_ssize_t i = 0; i < I; i++) {
        if (ds[i + 1] < ds[i]) {
            PyErr_Format(PyExc_ValueError, "%s: det_start is not offsets into %s", fn, rows_name);
            return -1;
        }
        if (ds[i + 1] - ds[i] > max_d) max_d = ds[i + 1] - ds[i];
    }
    for (Py_ssize_t k = 0; k < D; k++) {
        if (rows[k] < 0 || rows[k] >= N) {
            PyErr_Format(PyExc_ValueError, "%s: %s outside the boxes", fn, rows_name);
            return -1;
        }
    }
    for (Py_ssize_t g = 0; g < G; g++) {
        if (gimg[g] < 0 || gimg[g] >= I) {
            PyErr_Format(PyExc_ValueError, "%s: gt_image outside [0, I)", fn);
            return -1;
        }
    }
    return max_d;
}

/* GT stably by image (a counting sort of the checked gt_image): image i's GT in loaded order are g_order[g_start[i]
 * .. g_start[i + 1]) (g_start: I + 2, zeroed by the caller). Returns the most GT of one image. */
static Py_ssize_t gt_by_image(const int64_t *gimg, Py_ssize_t G, Py_ssize_t I, int64_t *g_order, int64_t *g_start) {
    for (Py_ssize_t g = 0; g < G; g++) g_start[gimg[g] + 1]++;
    Py_ssize_t max_g = 0;
    for (Py_ssize_t i = 0; i < I; i++) {
        if (g_start[i + 1] > max_g) max_g = g_start[i + 1];
        g_start[i + 1] += g_start[i];
    }
    for (Py_ssize_t g = 0; g < G; g++) g_order[g_start[gimg[g]]++] = g;
    for (Py_ssize_t i = I; i > 0; i--) g_start[i] = g_start[i - 1];
    g_start[0] = 0;
    return max_g;
}

/* The size bin of GT g in PerImageCounts: 0 small, 1 medium, 2 large. */
static int size_bin(const AtThreshold *th, int64_t g) {
    return th->garea[g] < th->small_max ? 0 : th->garea[g] < th->medium_max ? 1 : 2;
}

/* The threshold match's GT counts (th->counts, all 9 rows zeroed first): non-crowd GT per image and per size bin. */
static void threshold_gt_counts(const AtThreshold *th, const int64_t *gimg, const uint8_t *crowd, Py_ssize_t G) {
    const Py_ssize_t I = th->I;
    memset(th->counts, 0, sizeof(int64_t) * 9 * (size_t)I);
    for (Py_ssize_t g = 0; g < G; g++) {
        if (crowd[g]) continue;
        th->counts[2 * I + gimg[g]]++;
        th->counts[(4 + 2 * size_bin(th, g)) * I + gimg[g]]++;
    }
}

/* The outcome of detection r of image i in the threshold match: matched to GT g (>= 0) at IoU iou, or a false
 * positive unless it hit a crowd region. */
static void threshold_outcome(const AtThreshold *th, Py_ssize_t i, int64_t r, int64_t g, double iou) {
    const Py_ssize_t I = th->I;
    if (g >= 0) {
        th->det_gt[r] = g;
        th->det_iou[r] = iou;
        th->gt_det[g] = r;
        th->gt_iou[g] = iou;
        th->counts[i]++;
        th->counts[(3 + 2 * size_bin(th, g)) * I + i]++;
    } else if (!th->crowd_hit[r]) {
        th->counts[I + i]++;
    }
}

/* One image: its detections rows[0..nd) in score order, those with score >= th->score a prefix; has[0..n_has) the
 * ones with candidates (cand + h * ng, n_cand[h] each: position j in the image's loaded GT, IoU), gcr the GT's
 * crowd flags by j, g_order the GT indices by j. Returns how many detections reached the score. */
static Py_ssize_t threshold_image(const AtThreshold *th, Py_ssize_t i, const int64_t *rows, Py_ssize_t nd,
                                  const int64_t *has, Py_ssize_t n_has, Py_ssize_t ng, const Py_ssize_t *n_cand,
                                  const Cand *cand, const uint8_t *gcr, const int64_t *g_order) {
    memset(th->taken, 0, (size_t)ng);
    Py_ssize_t k = 0, h = 0;
    for (; k < nd && th->scores[rows[k]] >= th->score; k++) {
        const int64_t r = rows[k];
        Py_ssize_t best = -1;
        double best_iou = 0.0;
        if (h < n_has && has[h] == k) {
            const Cand *mine = cand + h * ng;
            for (Py_ssize_t q = 0; q < n_cand[h]; q++) {
                const Py_ssize_t j = mine[q].g;
                const double iou = mine[q].iou;
                if (!(iou >= th->iou)) continue;
                if (gcr[j]) {
                    th->crowd_hit[r] = 1;
                } else if (!th->taken[j] && (best < 0 || iou > best_iou || (iou == best_iou && j < best))) {
                    best = j;
                    best_iou = iou;
                }
            }
            h++;
        }
        if (best >= 0) th->taken[best] = 1;
        threshold_outcome(th, i, r, best >= 0 ? g_order[best] : -1, best_iou);
    }
    return k;
}

/* evaluate(boxes, det_index, det_start, gt_boxes, gt_image, gt_area, gt_crowd, ann_nonzero, area_ranges, thresholds,
 *          floor, matched, ignored, n_gt) -> None
 *
 * evaluate_images' matching after the score order: boxes (N, 4) float64 xywh, all detections; det_index (D) int64
 * the kept rows of boxes grouped by image, each image's in rank order, det_start (I + 1) int64 their offsets; GT as
 * loaded (G, 4) float64 boxes, gt_image (G) int64 in [0, I), gt_area (G) float64 (the annotations' area field),
 * gt_crowd and ann_nonzero (G) uint8; area_ranges (A, 2) float64 [lo, hi]; thresholds (T) float64, each clamped
 * below 1; floor: the lowest. Writes every element of matched and ignored (A, T, D) uint8 (the ApTable's: matched to
 * a GT with a non-zero id; matched to an ignored GT, or not matched and outside the area range) and n_gt (A, I)
 * int64 (regular GT per area range and image). Per image: the candidates of _match_areas once (the pairs reaching
 * floor, candidate_pairs' float operations), then the reference's greedy loop for each area range and threshold
 * over the detections that have any. A GT is ignored in a range when crowd or area < lo or area > hi; the GT order
 * of a range is regular first, then as loaded (a stable partition: candidates are found in loaded order). */
static PyObject *py_evaluate(PyObject *self, PyObject *args) {
    PyObject *o[20] = {NULL};
    double floor_iou, at_score = 0.0, at_iou = 0.0, small_max = 0.0, medium_max = 0.0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOdOOO|OddddOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &o[9], &floor_iou, &o[10], &o[11], &o[12], &o[13], &at_score, &at_iou, &small_max,
                          &medium_max, &o[14], &o[15], &o[16], &o[17], &o[18], &o[19]))
        return NULL;
    const int at = o[13] != NULL && o[19] != NULL; /* the threshold match too */
    if (at && !(at_iou >= floor_iou)) {
        PyErr_SetString(PyExc_ValueError, "evaluate: the threshold match needs iou >= floor (its candidates)");
        return NULL;
    }
    static const int sized[] = {0, 1, 2, 3, 8, 9};
    Py_ssize_t len[6];
    if (byte_lengths(o, sized, 6, len) < 0) return NULL;
    const Py_ssize_t N = len[0] / 32, D = len[1] / 8, I = len[2] / 8 - 1, G = len[3] / 32, A = len[4] / 16,
                     T = len[5] / 8;
    if (I < 0 || A <= 0 || T <= 0 || T > 64) {
        PyErr_SetString(PyExc_ValueError, "evaluate: empty image table, area ranges or thresholds, or over 64 of them");
        return NULL;
    }
    const Py_ssize_t bytes[20] = {N * 32, D * 8, (I + 1) * 8, G * 32, G * 8, G * 8, G, G, A * 16, T * 8,
                                  A * T * D, A * T * D, A * I * 8, N * 8, N * 8, N * 8, N, G * 8, G * 8, 9 * I * 8};
    static const char *const names[20] = {
        "boxes",   "det_index", "det_start", "gt_boxes", "gt_image", "gt_area", "gt_crowd",  "ann_nonzero", "area_ranges",
        "thresholds", "matched", "ignored",  "n_gt",     "scores",   "det_gt",  "det_iou",   "crowd_hit",   "gt_det",
        "gt_iou",  "counts"};
    Py_buffer v[20];
    int got = 0;
    PyObject *result = NULL;
    int64_t *g_order = NULL, *g_start = NULL, *has = NULL;
    uint8_t *g_ign = NULL, *outside = NULL, *taken = NULL, *gflag = NULL, *at_taken = NULL;
    Py_ssize_t covered = 0;
    Cand *cand = NULL, *sorted = NULL;
    Py_ssize_t *n_cand = NULL, *pos = NULL;
    uint64_t *pair_ok = NULL;
    double *corner = NULL, *det_corner = NULL;
    for (; got < (at ? 20 : 13); got++) {
        if (!get(o[got], &v[got], got >= 10 && got != 13, bytes[got], names[got])) goto done;
    }
    {
        const double *bx = v[0].buf, *gb = v[3].buf, *garea = v[5].buf, *rng = v[8].buf, *thr = v[9].buf;
        const int64_t *di = v[1].buf, *ds = v[2].buf, *gimg = v[4].buf;
        const uint8_t *crowd = v[6].buf, *nonzero = v[7].buf;
        uint8_t *matched = v[10].buf, *ignored = v[11].buf;
        int64_t *n_gt = v[12].buf;
        AtThreshold th = {0};
        if (at) {
            th.scores = v[13].buf, th.score = at_score, th.iou = at_iou, th.det_gt = v[14].buf, th.det_iou = v[15].buf;
            th.crowd_hit = v[16].buf, th.gt_det = v[17].buf, th.gt_iou = v[18].buf, th.counts = v[19].buf, th.I = I;
            th.garea = garea, th.small_max = small_max, th.medium_max = medium_max;
        }
        const Py_ssize_t max_d = check_layout("evaluate", "det_index", ds, I, di, D, N, gimg, G);
        if (max_d < 0) goto done;
        g_order = PyMem_Malloc(sizeof(int64_t) * (size_t)(G + 1));
        g_start = PyMem_Calloc((size_t)I + 2, sizeof(int64_t));
        g_ign = PyMem_Malloc((size_t)(A * G + 1));
        outside = PyMem_Malloc((size_t)(A * D + 1));
        has = PyMem_Malloc(sizeof(int64_t) * (size_t)(max_d + 1));
        n_cand = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(max_d + 1));
        if (!g_order || !g_start || !g_ign || !outside || !has || !n_cand) {
            PyErr_NoMemory();
            goto done;
        }
        const Py_ssize_t max_g = gt_by_image(gimg, G, I, g_order, g_start);
        cand = PyMem_Malloc(sizeof(Cand) * (size_t)(max_d * max_g + 1));
        sorted = PyMem_Malloc(sizeof(Cand) * (size_t)(max_g + 1));
        taken = PyMem_Malloc(sizeof(uint64_t) * (size_t)(max_g + 1));
        th.taken = at_taken = PyMem_Malloc((size_t)(max_g + 1));
        corner = PyMem_Malloc(sizeof(double) * 7 * (size_t)(max_g + 1));
        det_corner = PyMem_Malloc(sizeof(double) * 5 * (size_t)(max_d + 1));
        gflag = PyMem_Malloc((size_t)(2 * max_g + 1));
        pos = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(max_g + 1));
        pair_ok = PyMem_Malloc(sizeof(uint64_t) * (size_t)(max_g / 64 + 1));
        if (!cand || !sorted || !taken || !at_taken || !corner || !det_corner || !gflag || !pos || !pair_ok) {
            PyErr_NoMemory();
            goto done;
        }
        Py_BEGIN_ALLOW_THREADS;
        if (at) threshold_gt_counts(&th, gimg, crowd, G);
        /* per range: ignored GT (indexed by sorted position) and the regular count per image */
        for (Py_ssize_t a = 0; a < A; a++) {
            const double lo = rng[2 * a], hi = rng[2 * a + 1];
            uint8_t *ig = g_ign + a * G;
            int64_t *cnt = n_gt + a * I;
            for (Py_ssize_t i = 0; i < I; i++) {
                int64_t c = 0;
                for (Py_ssize_t q = g_start[i]; q < g_start[i + 1]; q++) {
                    const int64_t g = g_order[q];
                    ig[q] = crowd[g] || garea[g] < lo || garea[g] > hi;
                    c += !ig[q];
                }
                cnt[i] = c;
            }
        }
        double *gx0 = corner, *gy0 = corner + max_g, *gx1 = corner + 2 * max_g, *gy1 = corner + 3 * max_g,
               *ga = corner + 4 * max_g, *gcf = corner + 5 * max_g, *pair_iou = corner + 6 * max_g;
        uint8_t *gcr = gflag, *gnz = gflag + max_g;
        double *dx0 = det_corner, *dy0 = det_corner + max_d, *dx1 = det_corner + 2 * max_d,
               *dy1 = det_corner + 3 * max_d, *dar = det_corner + 4 * max_d;
        uint64_t *free_at = (uint64_t *)taken; /* per GT of the image: the thresholds at which it is still free */
        const uint64_t all_t = T == 64 ? ~(uint64_t)0 : (((uint64_t)1 << T) - 1);
        for (Py_ssize_t i = 0; i < I; i++) {
            const Py_ssize_t d0 = ds[i], nd = ds[i + 1] - ds[i], g0 = g_start[i], ng = g_start[i + 1] - g_start[i];
            if (nd == 0) continue;
            prefetch_boxes(bx, di + ds[i + 1], i + 1 < I ? ds[i + 2] - ds[i + 1] : 0);
            /* the image's detections as corners (each box read once: they lie scattered in the caller's array), and
             * the defaults: not matched; ignored iff outside the range (w * h against [lo, hi]) */
            for (Py_ssize_t k = 0; k < nd; k++) {
                const double *d = bx + 4 * di[d0 + k];
                dx0[k] = d[0];
                dy0[k] = d[1];
                dx1[k] = d[2] + d[0];
                dy1[k] = d[3] + d[1];
                dar[k] = d[2] * d[3];
            }
            for (Py_ssize_t a = 0; a < A; a++) {
                uint8_t *out = outside + a * D + d0;
                const double lo = rng[2 * a], hi = rng[2 * a + 1];
                for (Py_ssize_t k = 0; k < nd; k++) out[k] = (dar[k] < lo) | (dar[k] > hi); /* no branch */
                for (Py_ssize_t t = 0; t < T; t++) {
                    memset(matched + (a * T + t) * D + d0, 0, (size_t)nd);
                    memcpy(ignored + (a * T + t) * D + d0, out, (size_t)nd);
                }
            }
            if (ng == 0) {
                if (at) covered += threshold_image(&th, i, di + d0, nd, NULL, 0, 0, NULL, NULL, NULL, NULL);
                continue;
            }
            /* the image's GT as corners (candidate_pairs' sums), stored by left edge (insertion sort; as loaded when
             * an edge is NaN); pos: each one's position in the image's loaded order */
            const int by_left = image_gt_by_left(g_order + g0, ng, gb, crowd, gx0, gy0, gx1, gy1, ga, gcf, pos);
            for (Py_ssize_t j = 0; j < ng; j++) {
                const int64_t g = g_order[g0 + j];
                gcr[j] = crowd[g];
                gnz[j] = nonzero[g];
            }
            /* candidates (position j in the image's loaded GT, IoU); has: the detections with any. Only the GT left of
             * the detection's right edge can have w > 0 (w > 0 means min(dx1, gx1) > max(dx0, gx0) >= gx0): with
             * the GT by left edge, a prefix; its IoU is computed without branches (vectorised), then filtered. */
            Py_ssize_t n_has = 0;
            for (Py_ssize_t k = 0; k < nd; k++) {
                const Py_ssize_t end = by_left ? count_below(gx0, ng, dx1[k]) : ng;
                pair_scan(dx0[k], dy0[k], dx1[k], dy1[k], dar[k], gx0, gy0, gx1, gy1, ga, gcf, floor_iou, end, pair_iou,
                          pair_ok);
                Py_ssize_t n = 0;
                Cand *mine = cand + n_has * ng;
                for (Py_ssize_t word = 0; word < (end + 63) / 64; word++)
                for (uint64_t bits = pair_ok[word]; bits; bits &= bits - 1) {
                    const Py_ssize_t q = 64 * word + lowest_bit(bits);
                    const double iou = pair_iou[q];
                    mine[n].g = pos[q];
                    mine[n].iou = iou;
                    uint64_t reach = 0;
                    for (Py_ssize_t t = 0; t < T; t++) reach |= (uint64_t)(iou >= thr[t]) << t;
                    mine[n].reach = reach;
                    n++;
                }
                if (n) {
                    has[n_has] = k;
                    n_cand[n_has++] = n;
                }
            }
            if (at) {
                covered += threshold_image(&th, i, di + d0, nd, has, n_has, ng, n_cand, cand, gcr, g_order + g0);
            }
            if (n_has == 0) continue;
            /* The reference's loop for one threshold takes, among the candidates not yet taken (crowd ones always
             * free) whose IoU reaches the threshold, the regular one of highest IoU (the later on a tie), else the
             * ignored one of highest IoU (the later on a tie). So with each detection's candidates ranked that way
             * (regular first, IoU down, later first), at every threshold it takes the first candidate that reaches
             * it and is free there: one pass over the candidates serves all T thresholds, as bit masks over them. */
            for (Py_ssize_t a = 0; a < A; a++) {
                const uint8_t *ig = g_ign + a * G + g0;
                memset(free_at, 0xff, sizeof(uint64_t) * (size_t)ng);
                for (Py_ssize_t h = 0; h < n_has; h++) {
                    const Cand *in = cand + h * ng;
                    const Py_ssize_t n = n_cand[h], k = d0 + has[h];
                    for (Py_ssize_t c = 0; c < n; c++) { /* insertion sort into the ranking */
                        const Cand x = in[c];
                        Py_ssize_t q = c;
                        while (q > 0 && worse(&sorted[q - 1], &x, ig)) {
                            sorted[q] = sorted[q - 1];
                            q--;
                        }
                        sorted[q] = x;
                    }
                    uint64_t open = all_t;
                    for (Py_ssize_t c = 0; c < n && open; c++) {
                        const Py_ssize_t j = sorted[c].g;
                        const uint64_t take = open & sorted[c].reach & (gcr[j] ? all_t : free_at[j]);
                        if (!take) continue;
                        open &= ~take;
                        free_at[j] &= ~take;
                        const uint8_t nz = gnz[j], iv = ig[j] | (nz ? 0 : outside[a * D + k]);
                        for (uint64_t bits = take; bits; bits &= bits - 1) {
                            const Py_ssize_t t = lowest_bit(bits);
                            matched[(a * T + t) * D + k] = nz;
                            ignored[(a * T + t) * D + k] = iv;
                        }
                    }
                }
            }
        }
        Py_END_ALLOW_THREADS;
    }
    result = at ? PyLong_FromSsize_t(covered) : Py_NewRef(Py_None);
done:
    PyMem_Free(g_order);
    PyMem_Free(g_start);
    PyMem_Free(g_ign);
    PyMem_Free(outside);
    PyMem_Free(has);
    PyMem_Free(n_cand);
    PyMem_Free(cand);
    PyMem_Free(sorted);
    PyMem_Free(taken);
    PyMem_Free(at_taken);
    PyMem_Free(corner);
    PyMem_Free(det_corner);
    PyMem_Free(gflag);
    PyMem_Free(pos);
    PyMem_Free(pair_ok);
    for (int k = 0; k < got; k++) PyBuffer_Release(&v[k]);
    return result;
}

/* threshold_match(boxes, rows, det_start, gt_boxes, gt_image, gt_crowd, gt_area, iou, small_max, medium_max, det_gt,
 *                 det_iou, crowd_hit, gt_det, gt_iou, counts) -> None
 *
 * match_at_threshold's greedy pass: per image, the detections rows[det_start[i]:det_start[i + 1]] (rows of boxes,
 * (N, 4) float64, in score order) each take the free non-crowd GT of the image with the highest IoU >= iou, the
 * earliest as loaded on a tie (candidate_pairs' IoU, the same float operations). GT as loaded: (G, 4) float64,
 * gt_image (G) int64, gt_crowd (G) uint8, gt_area (G) float64. Writes, indexed as the inputs: det_gt (N) int64 the
 * matched GT or -1 and det_iou (N) float64 its IoU, crowd_hit (N) uint8 (a crowd GT reaches iou), gt_det (G) int64
 * and gt_iou (G) float64 (preset by the caller: -1, NaN, 0, -1, NaN), and counts (9, I) int64: per image tp, fp (not
 * matched, no crowd hit), n_gt (non-crowd), then tp and GT count of each size bin (area < small_max, < medium_max,
 * else) over the non-crowd GT, in PerImageCounts' field order. */
static PyObject *py_threshold_match(PyObject *self, PyObject *args) {
    PyObject *o[14];
    double iou_min, small_max, medium_max;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOOdddOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &iou_min,
                          &small_max, &medium_max, &o[7], &o[8], &o[9], &o[10], &o[11], &o[12]))
        return NULL;
    static const int sized[] = {0, 1, 2, 3};
    Py_ssize_t len[4];
    if (byte_lengths(o, sized, 4, len) < 0) return NULL;
    const Py_ssize_t N = len[0] / 32, K = len[1] / 8, I = len[2] / 8 - 1, G = len[3] / 32;
    if (I < 0) {
        PyErr_SetString(PyExc_ValueError, "threshold_match: empty image table");
        return NULL;
    }
    const Py_ssize_t bytes[13] = {N * 32, K * 8, (I + 1) * 8, G * 32, G * 8, G, G * 8, N * 8, N * 8, N, G * 8, G * 8,
                                  9 * I * 8};
    static const char *const names[13] = {"boxes",   "rows",      "det_start", "gt_boxes", "gt_image",
                                           "gt_crowd", "gt_area",  "det_gt",    "det_iou",  "crowd_hit",
                                           "gt_det",   "gt_iou",   "counts"};
    Py_buffer v[13];
    int got = 0;
    PyObject *result = NULL;
    int64_t *g_order = NULL, *g_start = NULL;
    uint64_t *pair_ok = NULL;
    double *corner = NULL, *dc = NULL;
    Py_ssize_t *pos = NULL;
    uint8_t *taken = NULL;
    for (; got < 13; got++) {
        if (!get(o[got], &v[got], got >= 7, bytes[got], names[got])) goto done;
    }
    {
        const double *bx = v[0].buf, *gb = v[3].buf, *garea = v[6].buf;
        const int64_t *rows = v[1].buf, *ds = v[2].buf, *gimg = v[4].buf;
        const uint8_t *crowd = v[5].buf;
        const AtThreshold th = {.garea = garea, .small_max = small_max, .medium_max = medium_max, .det_gt = v[7].buf,
                                .det_iou = v[8].buf, .crowd_hit = v[9].buf, .gt_det = v[10].buf, .gt_iou = v[11].buf,
                                .counts = v[12].buf, .I = I};
        const Py_ssize_t max_d = check_layout("threshold_match", "rows", ds, I, rows, K, N, gimg, G);
        if (max_d < 0) goto done;
        g_order = PyMem_Malloc(sizeof(int64_t) * (size_t)(G + 1));
        g_start = PyMem_Calloc((size_t)I + 2, sizeof(int64_t));
        if (!g_order || !g_start) {
            PyErr_NoMemory();
            goto done;
        }
        const Py_ssize_t max_g = gt_by_image(gimg, G, I, g_order, g_start);
        corner = PyMem_Malloc(sizeof(double) * 7 * (size_t)(max_g + 1));
        pos = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(max_g + 1));
        pair_ok = PyMem_Malloc(sizeof(uint64_t) * (size_t)(max_g / 64 + 1));
        taken = PyMem_Malloc((size_t)(max_g + 1));
        dc = PyMem_Malloc(sizeof(double) * 5 * (size_t)(max_d + 1));
        if (!corner || !pos || !pair_ok || !taken || !dc) {
            PyErr_NoMemory();
            goto done;
        }
        double *gx0 = corner, *gy0 = corner + max_g, *gx1 = corner + 2 * max_g, *gy1 = corner + 3 * max_g,
               *ga = corner + 4 * max_g, *gcf = corner + 5 * max_g, *pair_iou = corner + 6 * max_g;
        Py_BEGIN_ALLOW_THREADS;
        threshold_gt_counts(&th, gimg, crowd, G);
        for (Py_ssize_t i = 0; i < I; i++) {
            const Py_ssize_t g0 = g_start[i], ng = g_start[i + 1] - g_start[i];
            /* the image's GT by left edge, as in evaluate (pos: the position as loaded) */
            const int by_left = image_gt_by_left(g_order + g0, ng, gb, crowd, gx0, gy0, gx1, gy1, ga, gcf, pos);
            memset(taken, 0, (size_t)ng);
            /* the image's detections as corners first: a tight loop keeps their scattered loads in flight together */
            const Py_ssize_t d0 = ds[i], nd = ds[i + 1] - ds[i];
            prefetch_boxes(bx, rows + ds[i + 1], i + 1 < I ? ds[i + 2] - ds[i + 1] : 0);
            for (Py_ssize_t k = 0; k < nd; k++) {
                const double *d = bx + 4 * rows[d0 + k];
                dc[5 * k] = d[0];
                dc[5 * k + 1] = d[1];
                dc[5 * k + 2] = d[2] + d[0];
                dc[5 * k + 3] = d[3] + d[1];
                dc[5 * k + 4] = d[2] * d[3];
            }
            for (Py_ssize_t k = d0; k < d0 + nd; k++) {
                const int64_t r = rows[k];
                const double *e = dc + 5 * (k - d0);
                const Py_ssize_t end = by_left ? count_below(gx0, ng, e[2]) : ng;
                pair_scan(e[0], e[1], e[2], e[3], e[4], gx0, gy0, gx1, gy1, ga, gcf, iou_min, end, pair_iou, pair_ok);
                Py_ssize_t best = -1, best_pos = 0;
                double best_iou = 0.0;
                for (Py_ssize_t word = 0; word < (end + 63) / 64; word++)
                for (uint64_t bits = pair_ok[word]; bits; bits &= bits - 1) {
                    const Py_ssize_t q = 64 * word + lowest_bit(bits);
                    const Py_ssize_t j = pos[q];
                    if (gcf[q] != 0.0) {
                        th.crowd_hit[r] = 1;
                    } else if (!taken[j] && (best < 0 || pair_iou[q] > best_iou ||
                                             (pair_iou[q] == best_iou && j < best_pos))) {
                        best = q;
                        best_pos = j;
                        best_iou = pair_iou[q];
                    }
                }
                if (best >= 0) taken[best_pos] = 1;
                threshold_outcome(&th, i, r, best >= 0 ? g_order[g0 + best_pos] : -1, best_iou);
            }
        }
        Py_END_ALLOW_THREADS;
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(g_order);
    PyMem_Free(g_start);
    PyMem_Free(corner);
    PyMem_Free(pos);
    PyMem_Free(pair_ok);
    PyMem_Free(taken);
    PyMem_Free(dc);
    for (int k = 0; k < got; k++) PyBuffer_Release(&v[k]);
    return result;
}

static PyMethodDef methods[] = {
    {"precision", py_precision, METH_VARARGS,
     "precision(matched, ignored, rows, n_pos, recall_thresholds, out) -> None"},
    {"image_order", py_image_order, METH_VARARGS,
     "image_order(det_image, scores, min_score, max_dets, by_image, start, image_of, rank, order) -> int"},
    {"evaluate", py_evaluate, METH_VARARGS,
     "evaluate(boxes, det_index, det_start, gt_boxes, gt_image, gt_area, gt_crowd, ann_nonzero, area_ranges, "
     "thresholds, floor, matched, ignored, n_gt) -> None"},
    {"threshold_match", py_threshold_match, METH_VARARGS,
     "threshold_match(boxes, rows, det_start, gt_boxes, gt_image, gt_crowd, gt_area, iou, small_max, medium_max, "
     "det_gt, det_iou, crowd_hit, gt_det, gt_iou, counts) -> None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cmatch", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cmatch(void) { return PyModule_Create(&module); }

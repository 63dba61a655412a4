/*
 * Compiled inner loop of the AP bootstrap (module aegis_eval.metrics._cbootstrap, beside bootstrap.py and the NumPy
 * code it mirrors: bootstrap_ap, _chunk_precisions, _block_points, _precision_at_recalls).
 *
 * For every resample row and IoU threshold it builds the same candidate points as the NumPy code (the last TP of
 * each run, and the points of mixed tie blocks copy by copy), with the same weighted TP and FP counts, then the
 * interpolated precision at every recall threshold. Why the values are those of the NumPy path, bit for bit:
 *
 *   - the counts are sums of integer multiplicities held in doubles (every partial sum < 2**53), so they are exact
 *     whatever the order of additions;
 *   - the precision is tp / ((fp + tp) + eps), the same three correctly rounded operations in the same order; no
 *     contraction (the pragma below and -ffp-contract=off in setup.py), no -ffast-math;
 *   - the envelope is a running maximum and the pick a first-index search on nondecreasing TP counts, both exact.
 *
 * Resample rows are the innermost dimension (the weights arrive as groups of LANES rows, each transposed to images x
 * LANES and contiguous), so the walks along the detection lists add whole vectors of rows at a time. Arrays arrive
 * through the buffer protocol as flat, C-contiguous memory; bootstrap.py checks dtypes, shapes and index ranges, and
 * the sizes are checked again here.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && !defined(AEGIS_NO_CLONES)
/* Also compiled for AVX2 (wider vectors; no FMA: the avx2 target does not enable it, and contraction is off), chosen
 * at load time by the CPU; element-wise IEEE operations give the same results at any vector width. (An AVX-512F clone
 * measured no faster here.) */
#define VECTORISED __attribute__((target_clones("avx2", "default")))
#else
#define VECTORISED
#endif

/* Rows handled together: the lane width of every walk (bounds the per-chunk buffers to points x LANES doubles). */
#define LANES 32
/* Six arrays and seven per IoU threshold (at most 16 thresholds). */
#define MAX_BUFFERS (6 + 16 * 7)

typedef struct {
    Py_buffer views[MAX_BUFFERS];
    int n;
} Buffers;

static void release(Buffers *b) {
    for (int i = 0; i < b->n; i++) PyBuffer_Release(&b->views[i]);
    b->n = 0;
}

/* A C-contiguous buffer of `count` items of `itemsize` bytes (writable if asked), or NULL with an exception set. */
static void *get(Buffers *b, PyObject *obj, Py_ssize_t count, Py_ssize_t itemsize, int writable, const char *what) {
    if (b->n >= MAX_BUFFERS) {
        PyErr_SetString(PyExc_RuntimeError, "too many buffers");
        return NULL;
    }
    Py_buffer *v = &b->views[b->n];
    if (PyObject_GetBuffer(obj, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return NULL;
    b->n++;
    if (count < 0 || v->itemsize != itemsize || v->len != count * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd items of %zd bytes", what, count, itemsize);
        return NULL;
    }
    return v->buf;
}

static Py_ssize_t length(PyObject *obj) {
    Py_buffer v;
    if (PyObject_GetBuffer(obj, &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    Py_ssize_t n = v.itemsize ? v.len / v.itemsize : -1;
    PyBuffer_Release(&v);
    return n;
}

/* Index of the lowest set bit of a non-zero word. */
static inline int lowest_bit(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(x);
#else
    int i = 0;
    while (!(x & 1)) x >>= 1, i++;
    return i;
#endif
}

/* One IoU threshold's mixed tie blocks (bootstrap._ThresholdPlan, flattened): int64 arrays. */
typedef struct {
    Py_ssize_t n_blk, n_pt;
    const int64_t *blk_image, *blk_start, *blk_tp, *blk_fp, *pt_start, *pt_tp, *pt_fp;
    int64_t copies;
} Blocks;

static int parse_blocks(Buffers *b, PyObject *t, Blocks *p, Py_ssize_t n_images, Py_ssize_t n_det) {
    PyObject *o[7];
    long long copies;
    if (!PyArg_ParseTuple(t, "OOOOOOOL", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &copies)) return -1;
    p->n_blk = length(o[0]);
    p->n_pt = length(o[5]);
    if (p->n_blk < 0 || p->n_pt < 0 || copies < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad block sizes");
        return -1;
    }
    p->copies = copies;
    const int64_t **dst[7] = {&p->blk_image, &p->blk_start, &p->blk_tp, &p->blk_fp, &p->pt_start, &p->pt_tp, &p->pt_fp};
    Py_ssize_t n[7] = {p->n_blk, p->n_blk, p->n_blk, p->n_blk, p->n_blk + 1, p->n_pt, p->n_pt};
    for (int i = 0; i < 7; i++)
        if (!(*dst[i] = get(b, o[i], n[i], 8, 0, "block array"))) return -1;
    /* indices stay inside the arrays they index (bootstrap.py builds them so; checked, never trusted) */
    for (Py_ssize_t i = 0; i < p->n_blk; i++)
        if (p->blk_image[i] < 0 || p->blk_image[i] >= n_images || p->blk_start[i] < 0 || p->blk_start[i] >= n_det ||
            (i && p->blk_start[i] <= p->blk_start[i - 1]) || p->pt_start[i] < 0 || p->pt_start[i] >= p->pt_start[i + 1])
            goto bad;
    if (p->pt_start[p->n_blk] != p->n_pt) goto bad;
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "bootstrap block index out of range");
    return -1;
}

/* Per threshold and lane, what the backward walk carries: the weighted TP and ignored counts before and at the
 * current position (the totals less what the walk has passed), the envelope of the points after it, and the highest
 * recall threshold not yet answered.
 *
 * The envelope is kept as the point that attains it (its TP count et and its TP + FP count en), not as its precision.
 * Every point's precision tp / (n + eps) is a correctly rounded, hence monotone, function of its exact ratio, so the
 * largest rounded precision is the rounding of the largest exact ratio, and that point's precision, divided once when
 * a recall threshold takes it, is the NumPy path's envelope bit for bit. Below 2**26 counts have exact cross products
 * in doubles, so comparing tp * en with et * n compares the exact ratios without a division per point (exact = 1).
 * Adding eps leaves n unchanged for n >= 2 and turns n = 1 into 1 + eps, whose ratio 1 / (1 + eps) lies above every
 * tp / n < 1 and below 1, where the cross products rank it like 1 / 1; but points arrive with non-increasing n (the
 * walk goes backwards), so on equal cross products the envelope keeps the later point, which has the larger n: the
 * right choice for 1 / 1 against k / k, and the same precision otherwise. Larger counts (exact = 0) divide per point
 * as the NumPy path does. */
typedef struct {
    double tp_rem[LANES], ig_rem[LANES], et[LANES], en[LANES], env[LANES], cur[LANES];
    Py_ssize_t next[LANES];
    int has_ignored;
} Walk;

static const double EPS = 2.220446049250313e-16; /* np.spacing(1) */
static uint64_t LANE_BIT[LANES]; /* 1 << j, set when the module loads */

#if LANES > 64
#error "the lane mask is 64 bits"
#endif

/* One candidate point (its TP count and TP + FP count per lane), taken in descending sequence order: recall
 * thresholds whose need this point's TP count does not reach are answered with the envelope of the later points
 * (the first point reaching a need is the one after the last that does not; TP counts never decrease along the
 * points and needs never decrease along the thresholds), then the point joins the envelope. */
static inline void take_point(Walk *s, const double *tp, const double *n, const double *need, Py_ssize_t n_rec,
                              double *q, Py_ssize_t stride, int exact) {
    /* the lanes with a threshold to answer (few: visited one by one); OR of table bits, which vectorises */
    uint64_t lanes = 0;
    for (int j = 0; j < LANES; j++) lanes |= s->cur[j] > tp[j] ? LANE_BIT[j] : 0;
    for (; lanes; lanes &= lanes - 1) {
        const int j = lowest_bit(lanes);
        const double *nd = need + j * n_rec;
        double *out = q + j * stride;
        const double v = exact ? s->et[j] / (s->en[j] + EPS) : s->env[j];
        Py_ssize_t r = s->next[j];
        for (; r >= 0 && nd[r] > tp[j]; r--) out[r] = v;
        s->next[j] = r;
        s->cur[j] = r >= 0 ? nd[r] : -1.0;
    }
    if (exact) /* the update as arithmetic on exact integers (k = 0 or 1): a select compiles to a branch per vector */
        for (int j = 0; j < LANES; j++) {
            const double et = s->et[j], en = s->en[j];
            const double k = (double)(tp[j] * en > et * n[j]);
            s->et[j] = et + k * (tp[j] - et);
            s->en[j] = en + k * (n[j] - en);
        }
    else
        for (int j = 0; j < LANES; j++) {
            double d = n[j];
            d += EPS;
            const double pr = tp[j] / d;
            s->env[j] = pr > s->env[j] ? pr : s->env[j];
        }
}

/* Prefetch distance, in detections, of the weights the walk reads next (they sit at random images). */
#define AHEAD 8
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

/* The work of ap_precisions on checked buffers, rows [begin, end) (multiples of LANES; rows is too). */
VECTORISED
static void precisions(double *q, const double *wt, Py_ssize_t rows, Py_ssize_t images, Py_ssize_t begin,
                       Py_ssize_t end, const int64_t *det, const uint64_t *flags, Py_ssize_t n_det,
                       const double *totals, const double *need, Py_ssize_t n_rec, const Blocks *blocks,
                       Py_ssize_t n_thr, int exact, uint64_t ignored_thresholds, Walk *walk) {
    const Py_ssize_t stride = n_thr * n_rec; /* from one row's q to the next */
    for (Py_ssize_t r0 = begin; r0 < end; r0 += LANES) {
        /* this lane group's weights: images x LANES, contiguous */
        const double *wl = wt + r0 * images;
        const double *nd0 = need + r0 * n_rec;
        double *q0 = q + r0 * stride;
        /* totals: (1 + 2T, rows): all kept detections, then each threshold's TPs, then its ignored detections */
        double all_rem[LANES], n[LANES];
        Py_ssize_t m[16];
        for (int j = 0; j < LANES; j++) all_rem[j] = totals[r0 + j];
        for (Py_ssize_t t = 0; t < n_thr; t++) {
            Walk *s = &walk[t];
            for (int j = 0; j < LANES; j++) {
                s->tp_rem[j] = totals[(1 + t) * rows + r0 + j];
                s->ig_rem[j] = totals[(1 + n_thr + t) * rows + r0 + j];
                s->et[j] = s->env[j] = 0.0;
                s->en[j] = 1.0; /* the empty envelope: 0 / (1 + eps) = 0 */
                s->next[j] = n_rec - 1;
                s->cur[j] = n_rec ? nd0[j * n_rec + n_rec - 1] : -1.0;
            }
            s->has_ignored = (int)((ignored_thresholds >> t) & 1);
            m[t] = blocks[t].n_blk - 1;
        }
        for (Py_ssize_t d = n_det - 1; d >= 0; d--) {
            const uint64_t code = flags[d];
            const double *w = wl + det[d] * LANES;
            if (d >= AHEAD) {
                const char *ahead = (const char *)(wl + det[d - AHEAD] * LANES);
                for (size_t k = 0; k < LANES * sizeof(double); k += 64) PREFETCH(ahead + k);
            }
            /* a run end: its counts include itself, so they are taken before the walk passes it */
            for (uint64_t bits = (code >> 32) & 0xFFFF; bits; bits &= bits - 1) {
                const int t = lowest_bit(bits);
                Walk *s = &walk[t];
                const double *nn = all_rem;
                if (s->has_ignored) {
                    for (int j = 0; j < LANES; j++) n[j] = all_rem[j] - s->ig_rem[j];
                    nn = n;
                }
                take_point(s, s->tp_rem, nn, nd0, n_rec, q0 + t * n_rec, stride, exact);
            }
            for (int j = 0; j < LANES; j++) all_rem[j] -= w[j];
            for (uint64_t bits = code & 0xFFFF; bits; bits &= bits - 1) {
                Walk *s = &walk[lowest_bit(bits)];
                for (int j = 0; j < LANES; j++) s->tp_rem[j] -= w[j];
            }
            for (uint64_t bits = (code >> 16) & 0xFFFF; bits; bits &= bits - 1) {
                Walk *s = &walk[lowest_bit(bits)];
                for (int j = 0; j < LANES; j++) s->ig_rem[j] -= w[j];
            }
            /* a mixed tie block starting here: its points, copy by copy, from the last back */
            for (uint64_t bits = (code >> 48) & 0xFFFF; bits; bits &= bits - 1) {
                const int t = lowest_bit(bits);
                Walk *s = &walk[t];
                const Blocks *p = &blocks[t];
                const Py_ssize_t k = m[t]--;
                const double *kw = wl + p->blk_image[k] * LANES;
                const double btp = (double)p->blk_tp[k], bfp = (double)p->blk_fp[k];
                const int64_t first = p->pt_start[k], last = p->pt_start[k + 1] - 1;
                double t0[LANES], f0[LANES], tp[LANES];
                for (int j = 0; j < LANES; j++) {
                    t0[j] = s->tp_rem[j];
                    f0[j] = (all_rem[j] - s->ig_rem[j]) - t0[j];
                }
                for (int64_t c = p->copies - 1; c >= 0; c--)
                    for (int64_t l = last; l >= first; l--) {
                        for (int j = 0; j < LANES; j++) {
                            const double kj = kw[j];
                            double tin = 0.0, fin = 0.0;
                            if (kj > 0.0) {
                                if ((double)c < kj) {
                                    tin = (double)c * btp + (double)p->pt_tp[l];
                                    fin = (double)c * bfp + (double)p->pt_fp[l];
                                } else {
                                    tin = (kj - 1.0) * btp + (double)p->pt_tp[last];
                                    fin = (kj - 1.0) * bfp + (double)p->pt_fp[last];
                                }
                            }
                            tp[j] = t0[j] + tin;
                            n[j] = (f0[j] + fin) + tp[j];
                        }
                        take_point(s, tp, n, nd0, n_rec, q0 + t * n_rec, stride, exact);
                    }
            }
        }
        /* what no point left unanswered takes the envelope of all points (0 when there are none) */
        for (Py_ssize_t t = 0; t < n_thr; t++)
            for (int j = 0; j < LANES; j++) {
                double *out = q0 + j * stride + t * n_rec;
                const Walk *s = &walk[t];
                const double v = exact ? s->et[j] / (s->en[j] + EPS) : s->env[j];
                for (Py_ssize_t r = s->next[j]; r >= 0; r--) out[r] = v;
            }
    }
}

/* q(rows, T, R) interpolated precision of the resample rows [begin, end); see bootstrap._chunk_precisions. The GIL
 * is released: callers may run disjoint row ranges of the same arrays on several threads.
 * Arguments: q (rows*T*R doubles, written), wt (rows*images doubles: per group of LANES rows, images x LANES), rows,
 * images, det_image (D int64, accumulation order), flags (D uint64: per position, bit t of the four 16-bit fields
 * says TP, ignored, run end, mixed-block start at threshold t), totals ((1 + 2T)*rows doubles), need (rows*R doubles:
 * required TP counts), n_recall, blocks (tuple of T block tuples), begin, end (row range), exact (every count below
 * 2**26: the envelope by cross products, see Walk). */
static PyObject *ap_precisions(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o_q, *o_wt, *o_det, *o_flags, *o_tot, *o_need, *blocks;
    Py_ssize_t rows, images, n_rec, begin, end;
    int exact;
    if (!PyArg_ParseTuple(args, "OOnnOOOOnO!nnp", &o_q, &o_wt, &rows, &images, &o_det, &o_flags, &o_tot, &o_need,
                          &n_rec, &PyTuple_Type, &blocks, &begin, &end, &exact))
        return NULL;
    Py_ssize_t n_thr = PyTuple_GET_SIZE(blocks);
    Py_ssize_t n_det = length(o_det);
    if (rows < 0 || images < 0 || n_rec < 0 || n_det < 0 || n_thr > 16) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad sizes");
        return NULL;
    }
    if (rows % LANES || begin % LANES || end % LANES || begin < 0 || end < begin || end > rows) {
        PyErr_SetString(PyExc_ValueError, "rows and the row range must be multiples of the lane width");
        return NULL;
    }
    Buffers b = {.n = 0};
    Blocks blk[16];
    double *q = get(&b, o_q, rows * n_thr * n_rec, 8, 1, "q");
    const double *wt = q ? get(&b, o_wt, images * rows, 8, 0, "wt") : NULL;
    const int64_t *det = wt ? get(&b, o_det, n_det, 8, 0, "det_image") : NULL;
    const uint64_t *flags = det ? get(&b, o_flags, n_det, 8, 0, "flags") : NULL;
    const double *tot = flags ? get(&b, o_tot, (1 + 2 * n_thr) * rows, 8, 0, "totals") : NULL;
    const double *need = tot ? get(&b, o_need, rows * n_rec, 8, 0, "need") : NULL;
    if (!need) goto fail;
    for (Py_ssize_t t = 0; t < n_thr; t++)
        if (parse_blocks(&b, PyTuple_GET_ITEM(blocks, t), &blk[t], images, n_det) < 0) goto fail;
    /* every position's image in range, and its flags naming thresholds that exist, blocks as many as listed */
    uint64_t allowed = (n_thr ? ((uint64_t)1 << n_thr) - 1 : 0) * 0x0001000100010001ULL;
    Py_ssize_t starts[16] = {0};
    uint64_t ignored = 0; /* thresholds with an ignored detection */
    for (Py_ssize_t d = 0; d < n_det; d++) {
        ignored |= (flags[d] >> 16) & 0xFFFF;
        if (det[d] < 0 || det[d] >= images || (flags[d] & ~allowed)) {
            PyErr_SetString(PyExc_ValueError, "detection image or flags out of range");
            goto fail;
        }
        for (uint64_t bits = (flags[d] >> 48) & 0xFFFF; bits; bits &= bits - 1) {
            const int t = lowest_bit(bits);
            if (starts[t] >= blk[t].n_blk || blk[t].blk_start[starts[t]] != d) {
                PyErr_SetString(PyExc_ValueError, "block starts disagree with the flags");
                goto fail;
            }
            starts[t]++;
        }
    }
    for (Py_ssize_t t = 0; t < n_thr; t++)
        if (starts[t] != blk[t].n_blk) {
            PyErr_SetString(PyExc_ValueError, "block starts disagree with the flags");
            goto fail;
        }
    Walk *walk = malloc(sizeof(Walk) * (size_t)(n_thr ? n_thr : 1));
    if (!walk) {
        PyErr_NoMemory();
        goto fail;
    }
    Py_BEGIN_ALLOW_THREADS;
    precisions(q, wt, rows, images, begin, end, det, flags, n_det, tot, need, n_rec, blk, n_thr, exact, ignored, walk);
    Py_END_ALLOW_THREADS;
    free(walk);
    release(&b);
    Py_RETURN_NONE;
fail:
    release(&b);
    return NULL;
}

/* --- what the walk reads, from the table (bootstrap._walk_inputs is the NumPy definition) ---------------------- */

/* A growable int64 list (the mixed tie blocks of one threshold and field: few). */
typedef struct {
    int64_t *v;
    Py_ssize_t n, cap;
} List;

static int push(List *l, int64_t x) {
    if (l->n == l->cap) {
        Py_ssize_t cap = l->cap ? 2 * l->cap : 16;
        int64_t *v = realloc(l->v, (size_t)cap * sizeof(int64_t));
        if (!v) return -1;
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = x;
    return 0;
}

/* Per threshold: the last counted (not ignored) position not yet classified, and the block counts it needs. */
typedef struct {
    Py_ssize_t pos;   /* -1: none */
    int tp, mixed;    /* whether it is a TP, and in a mixed block */
    Py_ssize_t block; /* its tie block */
    int64_t mixed_block;  /* its block's index among the mixed blocks */
    int64_t in_tp, in_fp; /* TPs of its block up to and including it, FPs of its block before it */
    int64_t blk_tp, blk_fp; /* running TP and FP counts of the current block */
    List f[7];        /* blk_image, blk_start, blk_tp, blk_fp, pt_start, pt_tp, pt_fp */
    List pt_block;    /* the mixed block of each point */
} Pending;

/* Classify a threshold's pending position now that the next counted one is known (next_tp: it is a TP; next_mixed:
 * in a mixed block; next_block: its block; has_next = 0 at the end): a run end or a mixed-block point. */
static int settle(Pending *p, uint64_t *flags, int t, int has_next, int next_tp, int next_mixed,
                  Py_ssize_t next_block) {
    if (p->pos < 0 || !p->tp) return 0;
    if (!p->mixed) {
        if (!(has_next && next_tp && !next_mixed)) flags[p->pos] |= (uint64_t)1 << (32 + t);
        return 0;
    }
    if (has_next && next_tp && next_block == p->block) return 0;
    if (push(&p->f[5], p->in_tp) < 0 || push(&p->f[6], p->in_fp) < 0 || push(&p->pt_block, p->mixed_block) < 0)
        return -1;
    return 0;
}

/* walk_inputs(order (D int64), det_image (D int64), scores (D float64), matched (T*D uint8), ignored (T*D uint8), T,
 * n_images, det_out (D int64), flags_out (D uint64), per_image_out (I*(1+2T) int64, zeroed)) -> T tuples of 7 bytes
 * (int64 arrays: blk_image, blk_start, blk_tp, blk_fp, pt_start, pt_tp, pt_fp). */
static PyObject *walk_inputs(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o_order, *o_img, *o_sc, *o_m, *o_ig, *o_det, *o_flags, *o_pi;
    Py_ssize_t n_thr, n_images;
    if (!PyArg_ParseTuple(args, "OOOOOnnOOO", &o_order, &o_img, &o_sc, &o_m, &o_ig, &n_thr, &n_images, &o_det,
                          &o_flags, &o_pi))
        return NULL;
    Py_ssize_t n = length(o_order);
    if (n < 0 || n_images < 0 || n_thr < 0 || n_thr > 16) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad sizes (at most 16 thresholds)");
        return NULL;
    }
    const Py_ssize_t nm = n_thr * n;
    const Py_ssize_t width = 1 + 2 * n_thr;
    Buffers b = {.n = 0};
    const int64_t *order = get(&b, o_order, n, 8, 0, "order");
    const int64_t *img = order ? get(&b, o_img, n, 8, 0, "det_image") : NULL;
    const double *sc = img ? get(&b, o_sc, n, 8, 0, "scores") : NULL;
    const uint8_t *mt = sc ? get(&b, o_m, nm, 1, 0, "matched") : NULL;
    const uint8_t *ig = mt ? get(&b, o_ig, nm, 1, 0, "ignored") : NULL;
    int64_t *det = ig ? get(&b, o_det, n, 8, 1, "det_out") : NULL;
    uint64_t *flags = det ? get(&b, o_flags, n, 8, 1, "flags_out") : NULL;
    int64_t *per_image = flags ? get(&b, o_pi, n_images * width, 8, 1, "per_image_out") : NULL;
    if (!per_image) {
        release(&b);
        return NULL;
    }
    for (Py_ssize_t p = 0; p < n; p++)
        if (order[p] < 0 || order[p] >= n || img[order[p]] < 0 || img[order[p]] >= n_images) {
            release(&b);
            PyErr_SetString(PyExc_ValueError, "order or detection image out of range");
            return NULL;
        }
    Pending pend[16];
    memset(pend, 0, sizeof(pend));
    /* per detection, then per position of the order: bit t = matched at threshold t, bit 16 + t = ignored; and the
     * scores in the order (the table's arrays are read in their own order once, then gathered once) */
    const size_t cells = (size_t)(n ? n : 1);
    uint32_t *bits = calloc(cells, sizeof(uint32_t)), *code = malloc(cells * sizeof(uint32_t));
    double *score = malloc(cells * sizeof(double));
    if (!bits || !code || !score) {
        free(bits), free(code), free(score);
        release(&b);
        return PyErr_NoMemory();
    }
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t t = 0; t < n_thr; t++)
        for (Py_ssize_t o = 0; o < n; o++)
            bits[o] |= (uint32_t)(mt[t * n + o] != 0) << t | (uint32_t)(ig[t * n + o] != 0) << (16 + t);
    for (Py_ssize_t p = 0; p < n; p++) {
        const int64_t o = order[p];
        code[p] = bits[o];
        det[p] = img[o];
        score[p] = sc[o];
    }
    for (Py_ssize_t t = 0; t < n_thr; t++) pend[t].pos = -1;
    /* thresholds whose pending position is a TP outside / inside a mixed block (mirrors pend[t].tp and .mixed) */
    uint32_t plain_tp = 0, mixed_tp = 0;
    const uint32_t all = n_thr ? (uint32_t)(((uint64_t)1 << n_thr) - 1) : 0;
    Py_ssize_t block = -1;
    for (Py_ssize_t s = 0; s < n && !failed;) {
        /* one tie block [s, e): equal score and image in the accumulation order */
        const int64_t im = det[s];
        Py_ssize_t e = s + 1;
        while (e < n && score[e] == score[s] && det[e] == im) e++;
        block++;
        per_image[im * width] += e - s;
        if (e == s + 1) { /* one detection (most blocks): never mixed, every threshold at once */
            const uint32_t g = (code[s] >> 16) & all, counted = all & ~g, m = code[s] & counted;
            for (uint32_t x = counted & plain_tp & ~m; x; x &= x - 1) /* run ends: the next counted is no TP */
                flags[pend[lowest_bit(x)].pos] |= (uint64_t)1 << (32 + lowest_bit(x));
            for (uint32_t x = counted & mixed_tp; x && !failed; x &= x - 1) /* a mixed block's last TP: a point */
                failed = settle(&pend[lowest_bit(x)], flags, lowest_bit(x), 1, (m >> lowest_bit(x)) & 1, 0, block) < 0;
            for (uint32_t x = counted; x; x &= x - 1) {
                Pending *pd = &pend[lowest_bit(x)];
                pd->pos = s, pd->tp = (m >> lowest_bit(x)) & 1, pd->mixed = 0, pd->block = block;
            }
            plain_tp = (plain_tp & ~counted) | m;
            mixed_tp &= ~counted;
            flags[s] |= (uint64_t)m | (uint64_t)g << 16;
            for (uint32_t x = m; x; x &= x - 1) per_image[im * width + 1 + lowest_bit(x)]++;
            for (uint32_t x = g; x; x &= x - 1) per_image[im * width + 1 + n_thr + lowest_bit(x)]++;
            s = e;
            continue;
        }
        for (Py_ssize_t t = 0; t < n_thr && !failed; t++) {
            int any_tp = 0, any_fp = 0;
            for (Py_ssize_t p = s + 1; p < e; p++) { /* a block of one detection is never mixed */
                const int g = (code[p] >> (16 + t)) & 1, m = (code[p] >> t) & 1;
                any_tp |= m && !g;
                any_fp |= !m && !g;
            }
            if (e > s + 1) {
                const int g = (code[s] >> (16 + t)) & 1, m = (code[s] >> t) & 1;
                any_tp |= m && !g;
                any_fp |= !m && !g;
            }
            const int mixed = any_tp && any_fp;
            Pending *pd = &pend[t];
            pd->blk_tp = pd->blk_fp = 0;
            if (mixed) {
                int64_t cnt_tp = 0, cnt_fp = 0;
                for (Py_ssize_t p = s; p < e; p++) {
                    const int g = (code[p] >> (16 + t)) & 1, m = (code[p] >> t) & 1;
                    cnt_tp += m && !g;
                    cnt_fp += !m && !g;
                }
                if (push(&pd->f[0], im) < 0 || push(&pd->f[1], s) < 0 || push(&pd->f[2], cnt_tp) < 0 ||
                    push(&pd->f[3], cnt_fp) < 0) {
                    failed = 1;
                    break;
                }
                flags[s] |= (uint64_t)1 << (48 + t);
            }
            for (Py_ssize_t p = s; p < e; p++) {
                const int g = (code[p] >> (16 + t)) & 1, m = (code[p] >> t) & 1;
                if (g) {
                    flags[p] |= (uint64_t)1 << (16 + t);
                    per_image[im * width + 1 + n_thr + t]++;
                    continue;
                }
                const int is_tp = m;
                if (settle(pd, flags, (int)t, 1, is_tp, mixed, block) < 0) {
                    failed = 1;
                    break;
                }
                if (is_tp) {
                    flags[p] |= (uint64_t)1 << t;
                    per_image[im * width + 1 + t]++;
                }
                pd->pos = p, pd->tp = is_tp, pd->mixed = mixed, pd->block = block;
                pd->mixed_block = pd->f[0].n - 1;
                const uint32_t bit = (uint32_t)1 << t;
                plain_tp = is_tp && !mixed ? plain_tp | bit : plain_tp & ~bit;
                mixed_tp = is_tp && mixed ? mixed_tp | bit : mixed_tp & ~bit;
                pd->blk_tp += is_tp;
                pd->in_tp = pd->blk_tp, pd->in_fp = pd->blk_fp;
                pd->blk_fp += !is_tp;
            }
        }
        s = e;
    }
    for (Py_ssize_t t = 0; t < n_thr && !failed; t++) {
        Pending *pd = &pend[t];
        if (settle(pd, flags, (int)t, 0, 0, 0, 0) < 0) {
            failed = 1;
            break;
        }
        /* pt_start (M + 1): where each mixed block's points begin (points come in block order), then their count */
        Py_ssize_t k = 0;
        for (Py_ssize_t m = 0; m <= pd->f[0].n && !failed; m++) {
            while (k < pd->pt_block.n && pd->pt_block.v[k] < m) k++;
            failed = push(&pd->f[4], k) < 0;
        }
    }
    Py_END_ALLOW_THREADS;
    free(bits), free(code), free(score);
    release(&b);
    PyObject *out = failed ? NULL : PyTuple_New(n_thr);
    for (Py_ssize_t t = 0; out && t < n_thr; t++) {
        PyObject *fields = PyTuple_New(7);
        if (!fields) {
            Py_CLEAR(out);
            break;
        }
        PyTuple_SET_ITEM(out, t, fields);
        for (int k = 0; k < 7; k++) {
            PyObject *bytes = PyBytes_FromStringAndSize((const char *)pend[t].f[k].v,
                                                        pend[t].f[k].n * (Py_ssize_t)sizeof(int64_t));
            if (!bytes) {
                Py_CLEAR(out);
                break;
            }
            PyTuple_SET_ITEM(fields, k, bytes);
        }
    }
    for (Py_ssize_t t = 0; t < 16; t++) {
        for (int k = 0; k < 7; k++) free(pend[t].f[k].v);
        free(pend[t].pt_block.v);
    }
    if (failed) PyErr_NoMemory();
    return out;
}

static PyObject *lanes(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    return PyLong_FromLong(LANES);
}

static PyMethodDef methods[] = {
    {"lanes", lanes, METH_NOARGS, "Rows handled together: ap_precisions takes a multiple of this many."},
    {"ap_precisions", ap_precisions, METH_VARARGS, "Interpolated precision of every bootstrap row (bootstrap.py)."},
    {"walk_inputs", walk_inputs, METH_VARARGS, "Flags, per-image counts and mixed tie blocks the walk reads."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cbootstrap", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cbootstrap(void) {
    for (int j = 0; j < LANES; j++) LANE_BIT[j] = (uint64_t)1 << j;
    return PyModule_Create(&module);
}

/*
 * Compiled deflate of the toolkit's PNG writer (module aegis_data.files._cpng, beside png.py, whose NumPy code it mirrors).
 *
 * The bytes are defined by aegis_data/png.py (module docstring and the NumPy code there); this file writes the
 * same bytes faster, and tests compare both paths on every kind of input. In short: the Sub-filtered rows are
 * produced on the fly from the RGB rows, cut into blocks of a fixed number of bytes, and every block is a
 * dynamic-Huffman block of literals only, with a length-limited code built by the deterministic construction
 * below. Only integer arithmetic is used, no CPU-specific code paths, so the output is the same everywhere.
 *
 * Python interface:
 *   png_file(rgb, height, width, block_bytes, max_idat) -> bytes   the whole file, as png.py lays it out
 *   crc32(data, value=0) -> int, adler32(data, value=1) -> int   the checksums (same values as zlib's)
 *   code_lengths(freqs, max_bits) -> bytes                      the code construction, for tests
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(_MSC_VER)
#define restrict __restrict
#endif

#define NLIT 257         /* literals 0..255 and end-of-block (256): the only literal/length symbols used */
#define NCL 19           /* code-length alphabet: lengths 0..15 and the repeat codes 16, 17, 18 */
#define MAX_LIT_BITS 15
#define MAX_CL_BITS 7
#define MAX_SYMS NLIT
#define MAX_BLOCK_BYTES (1u << 24) /* frequencies and node weights stay far inside uint32/uint64 */
#define BLOCK_HEADER_MAX 512       /* bytes: 17 + 19*3 + 258*(7+7) bits of header, plus end-of-block */

/* Order in which the code-length code lengths are sent (RFC 1951, 3.2.7). */
static const uint8_t CL_ORDER[NCL] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

static uint32_t CRC_TABLE[8][256];
static uint8_t REV8[256];

static void init_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        CRC_TABLE[0][i] = c;
        uint8_t r = 0;
        for (int k = 0; k < 8; k++) r |= (uint8_t)(((i >> k) & 1) << (7 - k));
        REV8[i] = r;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            CRC_TABLE[t][i] = (CRC_TABLE[t - 1][i] >> 8) ^ CRC_TABLE[0][CRC_TABLE[t - 1][i] & 0xFF];
}

static inline uint32_t load32le(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* CRC-32 (ISO-HDLC, as zlib and PNG define it) of 8 bytes into the register, slicing by 8. */
static inline uint32_t crc_slice8(uint32_t reg, const uint8_t *p) {
    uint32_t lo = reg ^ load32le(p), hi = load32le(p + 4);
    return CRC_TABLE[7][lo & 0xFF] ^ CRC_TABLE[6][(lo >> 8) & 0xFF] ^ CRC_TABLE[5][(lo >> 16) & 0xFF] ^
           CRC_TABLE[4][lo >> 24] ^ CRC_TABLE[3][hi & 0xFF] ^ CRC_TABLE[2][(hi >> 8) & 0xFF] ^
           CRC_TABLE[1][(hi >> 16) & 0xFF] ^ CRC_TABLE[0][hi >> 24];
}

/* a * b modulo the CRC polynomial, in the reflected bit order (bit 31 is x**0). */
static uint32_t gf2_mult(uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (uint32_t bit = 1u << 31; bit; bit >>= 1) {
        if (a & bit) product ^= b;
        b = (b & 1) ? (b >> 1) ^ 0xEDB88320u : b >> 1; /* b * x */
    }
    return product;
}

/* x**(8n) modulo the polynomial: what n zero bytes do to the register. */
static uint32_t gf2_x8n(size_t n) {
    uint32_t result = 1u << 31, square = 1u << 23; /* x**0 and x**8 */
    for (; n; n >>= 1) {
        if (n & 1) result = gf2_mult(square, result);
        square = gf2_mult(square, square);
    }
    return result;
}

/* Long inputs go in four quarters at once: four independent table chains keep the CPU busy (~1.8x faster than
 * one here). A CRC register is linear, so after A then B it is reg(A) * x**(8|B|) xor the register of B alone. */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n) {
    uint32_t reg = ~crc;
    if (n >= 65536) {
        size_t q = (n / 4) & ~(size_t)7;
        const uint8_t *p1 = p + q, *p2 = p1 + q, *p3 = p2 + q;
        uint32_t r1 = 0, r2 = 0, r3 = 0;
        for (size_t i = 0; i < q; i += 8) {
            reg = crc_slice8(reg, p + i);
            r1 = crc_slice8(r1, p1 + i);
            r2 = crc_slice8(r2, p2 + i);
            r3 = crc_slice8(r3, p3 + i);
        }
        uint32_t shift = gf2_x8n(q);
        reg = gf2_mult(shift, gf2_mult(shift, gf2_mult(shift, reg) ^ r1) ^ r2) ^ r3;
        p += 4 * q, n -= 4 * q;
    }
    for (; n >= 8; n -= 8, p += 8) reg = crc_slice8(reg, p);
    for (; n; n--, p++) reg = CRC_TABLE[0][(reg ^ *p) & 0xFF] ^ (reg >> 8);
    return ~reg;
}

/* ---------------------------------------------------------------------------------------------------------
 * Length-limited code construction (mirrors png._code_lengths line by line).
 *   1. The used symbols (frequency > 0) sorted by (frequency, symbol). None: all lengths 0; one: length 1.
 *   2. Huffman's two-queue merge: repeatedly take the two lightest of the next unmerged leaf and the next
 *      unmerged internal node, the leaf on equal weight; their parent is the next internal node.
 *   3. The number of leaves at each depth; while a depth d above max_bits holds leaves, two of them (siblings)
 *      go: one takes their parent's place at d-1, the other joins a leaf at the deepest depth j <= d-2 that
 *      holds one, both moving to j+1. Each step keeps the code complete (Kraft sum 1).
 *   4. Lengths handed out in the sorted order of step 1, longest first.
 * --------------------------------------------------------------------------------------------------------- */
static void sort_keys(uint64_t *a, uint64_t *tmp, int n) { /* bottom-up merge sort, ascending */
    for (int width = 1; width < n; width *= 2) {
        for (int lo = 0; lo < n; lo += 2 * width) {
            int mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = a[i] <= a[j] ? a[i++] : a[j++];
            while (i < mid) tmp[k++] = a[i++];
            while (j < hi) tmp[k++] = a[j++];
        }
        memcpy(a, tmp, (size_t)n * sizeof *a);
    }
}

static void code_lengths(const uint32_t *freq, int nsym, int max_bits, uint8_t *len) {
    uint64_t key[MAX_SYMS], tmp[MAX_SYMS], weight[2 * MAX_SYMS];
    int parent[2 * MAX_SYMS], depth[2 * MAX_SYMS], count[2 * MAX_SYMS];
    int m = 0;
    memset(len, 0, (size_t)nsym);
    for (int s = 0; s < nsym; s++)
        if (freq[s]) key[m++] = ((uint64_t)freq[s] << 9) | (uint64_t)s; /* symbols < 512 */
    if (m == 0) return;
    if (m == 1) {
        len[key[0] & 511] = 1;
        return;
    }
    sort_keys(key, tmp, m);
    for (int i = 0; i < m; i++) weight[i] = key[i] >> 9;
    int leaf = 0, inner = m;
    for (int node = m; node < 2 * m - 1; node++) {
        int pick[2];
        for (int t = 0; t < 2; t++) {
            if (leaf < m && (inner >= node || weight[leaf] <= weight[inner])) pick[t] = leaf++;
            else pick[t] = inner++;
        }
        weight[node] = weight[pick[0]] + weight[pick[1]];
        parent[pick[0]] = parent[pick[1]] = node;
    }
    depth[2 * m - 2] = 0;
    for (int node = 2 * m - 3; node >= 0; node--) depth[node] = depth[parent[node]] + 1;
    int deepest = 0;
    memset(count, 0, sizeof count);
    for (int i = 0; i < m; i++) {
        count[depth[i]]++;
        if (depth[i] > deepest) deepest = depth[i];
    }
    for (int d = deepest; d > max_bits; d--) {
        while (count[d] > 0) {
            int j = d - 2;
            while (count[j] == 0) j--; /* j >= 1: fewer than 2**max_bits symbols (see png._code_lengths) */
            count[d] -= 2;
            count[d - 1] += 1;
            count[j + 1] += 2;
            count[j] -= 1;
        }
    }
    if (deepest > max_bits) deepest = max_bits;
    int i = 0;
    for (int d = deepest; d >= 1; d--)
        for (int c = 0; c < count[d]; c++) len[key[i++] & 511] = (uint8_t)d;
}

/* Canonical codes (RFC 1951, 3.2.2), bit-reversed because deflate sends codes most significant bit first. */
static void canonical_codes(const uint8_t *len, int nsym, uint16_t *code) {
    int bl_count[16] = {0}, next[16];
    for (int s = 0; s < nsym; s++) bl_count[len[s]]++;
    bl_count[0] = 0;
    int c = 0;
    for (int bits = 1; bits < 16; bits++) {
        c = (c + bl_count[bits - 1]) << 1;
        next[bits] = c;
    }
    for (int s = 0; s < nsym; s++) {
        int l = len[s];
        if (!l) {
            code[s] = 0;
            continue;
        }
        unsigned v = (unsigned)next[l]++;
        unsigned r = ((unsigned)REV8[v & 0xFF] << 8) | REV8[(v >> 8) & 0xFF];
        code[s] = (uint16_t)(r >> (16 - l));
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Bit writer: LSB first into a 64-bit buffer, stored 8 bytes at a time. After flush() at most 7 bits are
 * pending, so three codes of up to 15 bits fit before the next flush. The output buffer keeps 8 bytes of slack.
 * --------------------------------------------------------------------------------------------------------- */
typedef struct {
    uint8_t *out;
    uint64_t bits;
    unsigned n;
} BitWriter;

static inline void store64le(uint8_t *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, 8);
#else
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
#endif
}

static inline void flush(BitWriter *w) {
    store64le(w->out, w->bits);
    w->out += w->n >> 3;
    w->bits >>= (w->n & ~7u);
    w->n &= 7;
}

static inline void put(BitWriter *w, unsigned value, unsigned nbits) { /* nbits <= 16 */
    w->bits |= (uint64_t)value << w->n;
    w->n += nbits;
    if (w->n >= 32) flush(w);
}

/* Run-length coding of a sequence of code lengths (mirrors png._rle): a zero run of 11..138 is symbol 18, of
 * 3..10 symbol 17; a non-zero length is sent, then repeats of it in runs of 3..6 as symbol 16; whatever is
 * left of a run is sent as plain lengths. Returns the number of (symbol, extra) pairs. */
static int rle(const uint8_t *len, int n, uint8_t *sym, uint8_t *extra) {
    int k = 0;
    for (int i = 0; i < n;) {
        int v = len[i], run = 1;
        while (i + run < n && len[i + run] == v) run++;
        i += run;
        if (v == 0) {
            while (run >= 11) {
                int r = run < 138 ? run : 138;
                sym[k] = 18, extra[k++] = (uint8_t)(r - 11);
                run -= r;
            }
            if (run >= 3) {
                sym[k] = 17, extra[k++] = (uint8_t)(run - 3);
                run = 0;
            }
        } else {
            sym[k] = (uint8_t)v, extra[k++] = 0;
            run--;
            while (run >= 3) {
                int r = run < 6 ? run : 6;
                sym[k] = 16, extra[k++] = (uint8_t)(r - 3);
                run -= r;
            }
        }
        for (; run > 0; run--) sym[k] = (uint8_t)v, extra[k++] = 0;
    }
    return k;
}

/* Block header: BFINAL, BTYPE=2, HLIT=257, HDIST=1, HCLEN, the code-length code, then the literal/length and
 * the distance code lengths, each run-length coded on its own (the single distance code has length 1). */
static void write_header(BitWriter *w, const uint8_t *litlen, int final) {
    static const uint8_t DIST_LEN[1] = {1};
    static const uint8_t EXTRA_BITS[NCL] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 3, 7};
    uint8_t sym[NLIT + 1], extra[NLIT + 1], cllen[NCL];
    uint32_t clfreq[NCL] = {0};
    uint16_t clcode[NCL];
    int k = rle(litlen, NLIT, sym, extra);
    k += rle(DIST_LEN, 1, sym + k, extra + k);
    for (int i = 0; i < k; i++) clfreq[sym[i]]++;
    code_lengths(clfreq, NCL, MAX_CL_BITS, cllen);
    canonical_codes(cllen, NCL, clcode);
    int hclen = NCL;
    while (hclen > 4 && cllen[CL_ORDER[hclen - 1]] == 0) hclen--;
    put(w, final ? 1u : 0u, 1);
    put(w, 2, 2);
    put(w, NLIT - 257, 5);
    put(w, 1 - 1, 5);
    put(w, (unsigned)(hclen - 4), 4);
    for (int i = 0; i < hclen; i++) put(w, cllen[CL_ORDER[i]], 3);
    for (int i = 0; i < k; i++) {
        put(w, clcode[sym[i]], cllen[sym[i]]);
        if (EXTRA_BITS[sym[i]]) put(w, extra[i], EXTRA_BITS[sym[i]]);
    }
}

/* The next n bytes of the Sub-filtered stream, from row r, column c (column 0 is the filter byte). */
static void fill(uint8_t *restrict dst, size_t n, const uint8_t *restrict rgb, size_t width, size_t *r, size_t *c) {
    size_t stride = 3 * width, row = stride + 1;
    while (n) {
        const uint8_t *src = rgb + *r * stride; /* column j holds src[j-1] minus src[j-4] */
        size_t j = *c, end = j + n < row ? j + n : row;
        n -= end - j;
        if (j == 0) *dst++ = 1, j = 1;
        for (; j < end && j < 4; j++) *dst++ = src[j - 1];
        for (; j < end; j++) *dst++ = (uint8_t)(src[j - 1] - src[j - 4]);
        if (end == row) (*r)++, *c = 0;
        else *c = end;
    }
}

/* Byte histogram of a block (freq[0..255]) and the Adler-32 continued over it. Eight tables, so that runs of
 * one value (common in filtered images) do not serialise on one counter. s1 and s2 are kept in 64 bits and
 * reduced once per call (s2 stays below 2**57 for up to 2**24 bytes). Eight bytes at a time, s2 grows by 8*s1
 * plus the bytes weighted 8, 7, ..., 1: with the even and the odd bytes of a little-endian word spread into
 * 16-bit lanes, one multiplication sums a lane set with its weights into the top lane (4 * 255 * 8 < 2**16,
 * so no lane overflows into the next). */
static uint32_t count(const uint8_t *q, size_t m, uint32_t *freq, uint32_t adler) {
    const uint64_t LANES = 0x00FF00FF00FF00FFull;
    uint32_t hist[8][256];
    uint64_t a = adler & 0xFFFF, b = adler >> 16;
    size_t j;
    memset(hist, 0, sizeof hist);
    for (j = 0; j + 8 <= m; j += 8) {
        for (int k = 0; k < 8; k++) hist[k][q[j + k]]++;
        uint64_t v = (uint64_t)load32le(q + j) | ((uint64_t)load32le(q + j + 4) << 32);
        uint64_t even = v & LANES, odd = (v >> 8) & LANES; /* bytes 0, 2, 4, 6 and 1, 3, 5, 7 */
        b += 8 * a + ((even * 0x0008000600040002ull) >> 48) + ((odd * 0x0007000500030001ull) >> 48);
        a += ((even + odd) * 0x0001000100010001ull) >> 48;
    }
    for (; j < m; j++) {
        hist[0][q[j]]++;
        a += q[j];
        b += a;
    }
    for (int s = 0; s < 256; s++) {
        uint32_t f = 0;
        for (int k = 0; k < 8; k++) f += hist[k][s];
        freq[s] = f;
    }
    return (uint32_t)(((b % 65521) << 16) | (a % 65521));
}

/* Adler-32 of any buffer through the encoder's own code (the module's adler32, for tests). */
static uint32_t adler32_update(uint32_t adler, const uint8_t *p, size_t n) {
    uint32_t freq[256];
    do {
        size_t m = n < MAX_BLOCK_BYTES ? n : MAX_BLOCK_BYTES;
        adler = count(p, m, freq, adler);
        p += m, n -= m;
    } while (n);
    return adler;
}

/* One block: its code from its histogram, the header, the bytes, end-of-block. */
static void write_block(BitWriter *w, const uint8_t *p, size_t n, const uint32_t *freq, int final) {
    uint8_t len[NLIT];
    uint16_t code[NLIT];
    code_lengths(freq, NLIT, MAX_LIT_BITS, len);
    canonical_codes(len, NLIT, code);
    write_header(w, len, final);
    flush(w); /* at most 7 bits pending: three codes fit before each 8-byte store */
    uint8_t *out = w->out;
    uint64_t bits = w->bits;
    unsigned nb = w->n;
    size_t i;
    for (i = 0; i + 3 <= n; i += 3) {
        unsigned s0 = p[i], s1 = p[i + 1], s2 = p[i + 2];
        bits |= (uint64_t)code[s0] << nb;
        nb += len[s0];
        bits |= (uint64_t)code[s1] << nb;
        nb += len[s1];
        bits |= (uint64_t)code[s2] << nb;
        nb += len[s2];
        store64le(out, bits);
        out += nb >> 3;
        bits >>= (nb & ~7u);
        nb &= 7;
    }
    w->out = out, w->bits = bits, w->n = nb;
    for (; i < n; i++) put(w, code[p[i]], len[p[i]]);
    put(w, code[256], len[256]);
}

/* The zlib stream of the Sub-filtered rows of an h x w RGB image; returns the number of bytes written. */
static size_t zlib_stream(const uint8_t *rgb, size_t h, size_t w, size_t block, uint8_t *scratch, uint8_t *out0) {
    size_t total = h * (3 * w + 1), pos = 0, r = 0, c = 0;
    uint32_t adler = 1, freq[NLIT];
    BitWriter bw = {out0 + 2, 0, 0};
    out0[0] = 0x78, out0[1] = 0x01; /* deflate, 32 KiB window, FLEVEL 0, no dictionary; 0x7801 % 31 == 0 */
    while (pos < total) {
        size_t n = total - pos < block ? total - pos : block;
        fill(scratch, n, rgb, w, &r, &c);
        pos += n;
        adler = count(scratch, n, freq, adler);
        freq[256] = 1; /* end-of-block, once */
        write_block(&bw, scratch, n, freq, pos == total);
    }
    flush(&bw);
    if (bw.n) *bw.out++ = (uint8_t)bw.bits; /* last byte, padded with zero bits */
    for (int k = 3; k >= 0; k--) *bw.out++ = (uint8_t)(adler >> (8 * k));
    return (size_t)(bw.out - out0);
}

static void put32be(uint8_t *p, uint32_t v) {
    for (int k = 0; k < 4; k++) p[k] = (uint8_t)(v >> (24 - 8 * k));
}

/* Bytes before the stream: signature (8), IHDR chunk (25), first IDAT length and type (8). */
#define STREAM_AT 41

/* The whole file, as png.py lays it out: signature, IHDR, the stream in IDAT chunks of at most max_idat bytes,
 * IEND. The stream is written in place after the first IDAT header; when it needs more than one chunk, its
 * pieces are moved apart (last first) to make room for the chunk boundaries. */
static size_t png_file(const uint8_t *rgb, size_t h, size_t w, size_t block, size_t max_idat, uint8_t *scratch,
                       uint8_t *out) {
    static const uint8_t SIGNATURE[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    memcpy(out, SIGNATURE, 8);
    put32be(out + 8, 13);
    memcpy(out + 12, "IHDR", 4);
    put32be(out + 16, (uint32_t)w);
    put32be(out + 20, (uint32_t)h);
    const uint8_t ihdr_rest[5] = {8, 2, 0, 0, 0}; /* 8-bit truecolour, deflate, adaptive filtering, no interlace */
    memcpy(out + 24, ihdr_rest, 5);
    put32be(out + 29, crc32_update(0, out + 12, 17));
    size_t size = zlib_stream(rgb, h, w, block, scratch, out + STREAM_AT);
    size_t pieces = (size + max_idat - 1) / max_idat;
    for (size_t k = pieces - 1; k > 0; k--) {
        size_t len = size - k * max_idat < max_idat ? size - k * max_idat : max_idat;
        memmove(out + STREAM_AT + k * (max_idat + 12), out + STREAM_AT + k * max_idat, len);
    }
    uint8_t *p = out + STREAM_AT - 8;
    for (size_t k = 0; k < pieces; k++) {
        size_t len = size - k * max_idat < max_idat ? size - k * max_idat : max_idat;
        put32be(p, (uint32_t)len);
        memcpy(p + 4, "IDAT", 4);
        put32be(p + 8 + len, crc32_update(0, p + 4, len + 4));
        p += 12 + len;
    }
    put32be(p, 0);
    memcpy(p + 4, "IEND", 4);
    put32be(p + 8, crc32_update(0, p + 4, 4));
    return (size_t)(p + 12 - out);
}

/* ---------------------------------------------------------------------------------------------------------
 * Python wrappers
 * --------------------------------------------------------------------------------------------------------- */
/* The output is written into a worst-case buffer (up to 15/8 of the input) kept from one call to the next, then
 * copied into a bytes object of the exact size. Fresh memory costs a page fault per 4 KiB on first touch (measured:
 * 22 MB of fresh pages take ~14 ms to write here, reused ones ~1 ms), and an exact-size result is small enough
 * for malloc to recycle. Taken and given back with the GIL held; a concurrent call allocates its own. */
static uint8_t *cached_buffer;
static size_t cached_capacity;
#define CACHE_MAX_CAPACITY ((size_t)1 << 28) /* 256 MiB: a 12 MP frame needs 68 MB */

static uint8_t *take_buffer(size_t *capacity) { /* at least *capacity bytes; *capacity becomes the size */
    if (cached_buffer && cached_capacity >= *capacity) {
        uint8_t *b = cached_buffer;
        cached_buffer = NULL;
        *capacity = cached_capacity;
        return b;
    }
    return (uint8_t *)malloc(*capacity);
}

static void give_back_buffer(uint8_t *b, size_t capacity) {
    if (capacity > CACHE_MAX_CAPACITY || (cached_buffer && cached_capacity >= capacity)) {
        free(b);
        return;
    }
    free(cached_buffer); /* a smaller one, or none */
    cached_buffer = b;
    cached_capacity = capacity;
}

static PyObject *py_png_file(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t h, w, block, max_idat;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnnn:png_file", &view, &h, &w, &block, &max_idat)) return NULL;
    PyObject *result = NULL;
    uint8_t *scratch = NULL;
    if (h < 1 || w < 1 || h > 0x7FFFFFFF || w > 0x7FFFFFFF || block < 1 || (size_t)block > MAX_BLOCK_BYTES ||
        max_idat < 1 || max_idat > 0x7FFFFFFF) {
        PyErr_Format(PyExc_ValueError, "png_file: need 1 <= height, width, max_idat < 2**31 and "
                                       "1 <= block_bytes <= %u", MAX_BLOCK_BYTES);
        goto done;
    }
    size_t row = 3 * (size_t)w + 1;
    if ((size_t)h > (size_t)PY_SSIZE_T_MAX / 4 / row) {
        PyErr_SetString(PyExc_OverflowError, "png_file: image too large");
        goto done;
    }
    size_t total = (size_t)h * row;
    if ((size_t)view.len != (size_t)h * 3 * (size_t)w) {
        PyErr_Format(PyExc_ValueError, "png_file: expected %zu bytes of RGB, got %zd", (size_t)h * 3 * (size_t)w,
                     view.len);
        goto done;
    }
    size_t nblocks = (total + (size_t)block - 1) / (size_t)block;
    if (nblocks > (size_t)PY_SSIZE_T_MAX / 4 / BLOCK_HEADER_MAX) {
        PyErr_SetString(PyExc_OverflowError, "png_file: image too large for this block size");
        goto done;
    }
    /* Worst case: 15 bits per byte plus each block's header, 6 bytes of zlib wrapper, 8 bytes of slack for the
     * bit writer; around it the chunks (12 bytes each) and the signature and IHDR. */
    size_t stream_cap = total / 8 * 15 + 15 + nblocks * BLOCK_HEADER_MAX + 16;
    size_t cap = STREAM_AT + stream_cap + 12 * (stream_cap / (size_t)max_idat + 1) + 12;
    if (cap > (size_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_OverflowError, "png_file: image too large");
        goto done;
    }
    uint8_t *out = take_buffer(&cap);
    scratch = (uint8_t *)malloc((size_t)block < total ? (size_t)block : total);
    if (!scratch || !out) {
        free(out);
        PyErr_NoMemory();
        goto done;
    }
    size_t used;
    Py_BEGIN_ALLOW_THREADS
    used = png_file((const uint8_t *)view.buf, (size_t)h, (size_t)w, (size_t)block, (size_t)max_idat, scratch, out);
    Py_END_ALLOW_THREADS
    result = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)used);
    give_back_buffer(out, cap);
done:
    free(scratch);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *checksum(PyObject *args, const char *fmt, uint32_t (*fn)(uint32_t, const uint8_t *, size_t),
                          unsigned long start) {
    Py_buffer view;
    unsigned long value = start;
    if (!PyArg_ParseTuple(args, fmt, &view, &value)) return NULL;
    uint32_t v = (uint32_t)value;
    Py_BEGIN_ALLOW_THREADS
    v = fn(v, (const uint8_t *)view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(v);
}

static PyObject *py_crc32(PyObject *self, PyObject *args) {
    (void)self;
    return checksum(args, "y*|k:crc32", crc32_update, 0);
}

static PyObject *py_adler32(PyObject *self, PyObject *args) {
    (void)self;
    return checksum(args, "y*|k:adler32", adler32_update, 1);
}

static PyObject *py_code_lengths(PyObject *self, PyObject *args) {
    Py_buffer view;
    int max_bits;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*i", &view, &max_bits)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t nsym = view.len / 4;
    if (view.len % 4 || nsym < 1 || nsym > MAX_SYMS || max_bits < 1 || max_bits > 15 ||
        (nsym > (1 << max_bits))) {
        PyErr_SetString(PyExc_ValueError, "code_lengths: need 1..257 uint32 frequencies and 1 <= max_bits <= 15, "
                                          "with at most 2**max_bits symbols");
        goto done;
    }
    uint32_t freq[MAX_SYMS];
    uint8_t len[MAX_SYMS];
    memcpy(freq, view.buf, (size_t)view.len); /* native-endian uint32, as numpy's uint32 array holds them */
    code_lengths(freq, (int)nsym, max_bits, len);
    result = PyBytes_FromStringAndSize((const char *)len, nsym);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"png_file", py_png_file, METH_VARARGS, "png_file(rgb, height, width, block_bytes, max_idat) -> bytes"},
    {"crc32", py_crc32, METH_VARARGS, "crc32(data, value=0) -> int"},
    {"adler32", py_adler32, METH_VARARGS, "adler32(data, value=1) -> int"},
    {"code_lengths", py_code_lengths, METH_VARARGS, "code_lengths(freqs_uint32, max_bits) -> bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cpng", "Compiled deflate of aegis_data.files.png.", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cpng(void) {
    init_tables();
    return PyModule_Create(&module);
}

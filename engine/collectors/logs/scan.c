/* The block reader's compiled kernels (issue 17): the byte work on one block of whole lines that
 * numpy does in several passes, done in one pass per line. Loaded with ctypes (no Python API, so
 * the GIL is released while a kernel runs and two blocks are scanned on two cores). Built on
 * first use by precdx.collectors.logs.native (native.py); every result is the same as the numpy path's
 * (tests compare the two), which stays the reference when no C compiler is there.
 *
 * A block is `b[0:n]`, whole lines each ending with '\n'. Lines are [start, end) with b[end] the
 * newline. Numbers: a kernel only reads a value itself when it can give exactly what Python's
 * float() gives (a plain decimal of at most 15 significant digits and a power of ten up to 22:
 * one correctly rounded IEEE operation on two exact doubles); any other spelling is flagged and
 * read by the caller with the shared number grammar. Also: the fold of a run's points into
 * windows (pdx_fold, for series.Windows).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <float.h>

#define PIPE '|'

/* Where `lit` (n bytes) first starts in [p, e) (memchr for its first byte); NULL when it does not. */
static const uint8_t *next_literal(const uint8_t *p, const uint8_t *e, const uint8_t *lit, int64_t n) {
    while (e - p >= n) {
        const uint8_t *q = memchr(p, lit[0], (size_t)(e - p - n + 1));
        if (q == NULL) return NULL;
        if (!memcmp(q, lit, (size_t)n)) return q;
        p = q + 1;
    }
    return NULL;
}

/* Line starts and ends (the newline's offset) of the block, for up to `cap` lines; cand[i] = 1
 * when line i can be a Megatron iteration line read in columns (not empty, ends with a pipe,
 * holds another pipe and `iteration`, which every line layout holds where it reads its step;
 * the numpy path leaves that last test to the layouts). *longest: the longest line's length
 * (bytes before its newline). Returns
 * the number of lines, or -(the number of lines) when there are more than `cap` (nothing past
 * `cap` written: call again with room for them all). */
int64_t pdx_lines(const uint8_t *b, int64_t n, int64_t cap, int64_t *starts, int64_t *ends, uint8_t *cand,
                  int64_t *longest) {
    int64_t i = 0, most = 0, s = 0;
    while (s < n) {
        const uint8_t *q = memchr(b + s, '\n', (size_t)(n - s));
        if (!q) break;
        int64_t e = (int64_t)(q - b);
        if (i < cap) {
            starts[i] = s;
            ends[i] = e;
            cand[i] = e > s && b[e - 1] == PIPE && e - 1 > s && memchr(b + s, PIPE, (size_t)(e - 1 - s)) != NULL
                      && next_literal(b + s, b + e, (const uint8_t *)"iteration", 9) != NULL;
        }
        if (e - s > most) most = e - s;
        i++;
        s = e + 1;
    }
    *longest = most;
    return i <= cap ? i : -i;
}

static const double P10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

#define DIGIT(c) ((unsigned)((c) - '0') <= 9u)
#define ONES UINT64_C(0x0101010101010101)
#define HIGH UINT64_C(0x8080808080808080)

/* The high bit of each byte of w that is an ASCII digit, exactly (no borrow crosses a byte:
 * each is made >= 0x80 before 10 is taken off). */
static inline uint64_t digit_mask(uint64_t w) {
    uint64_t x = w ^ (ONES * 0x30);  /* a digit's byte becomes 0..9 */
    uint64_t ge10 = ((x | HIGH) - ONES * 10) & HIGH;
    return ~(ge10 | (x & HIGH)) & HIGH;
}

/* Eight digits at p read at once (8 ASCII digits in w, the first at the lowest address, on a
 * little-endian machine): pairs, then fours, then the eight combined by three multiplications. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SWAR_DIGITS 1
static inline uint64_t eight_digits(uint64_t w) {
    w = ((w & UINT64_C(0x0F0F0F0F0F0F0F0F)) * 2561) >> 8;
    w = ((w & UINT64_C(0x00FF00FF00FF00FF)) * 6553601) >> 16;
    return ((w & UINT64_C(0x0000FFFF0000FFFF)) * UINT64_C(42949672960001)) >> 32;
}
#else
#define SWAR_DIGITS 0
static inline uint64_t eight_digits(uint64_t w) { (void)w; return 0; }
#endif

/* The mantissa ([digits][.digits]) at p, never past e: returns where it ends; *m its
 * significant digits while there are at most `most` (15, or 19 at most: *fine 0 past that),
 * *exp10 the power of ten its point gives, *any 1 when it has a digit, *point 1 when it has a
 * point. One pass: leading zeros (not significant), then the significant digits, eight at a
 * time while `most` allows. */
static inline const uint8_t *mantissa(const uint8_t *p, const uint8_t *e, uint64_t *m, int *exp10, int *any, int *fine,
                               int most, int *ndig, int *point) {
    uint64_t v = 0, w;
    int nd = 0, x = 0, a = 0, ok = 1, pt = 0;
    while (p < e && *p == '0') p++, a = 1;
    while (SWAR_DIGITS && nd + 8 <= most && e - p >= 8 && (memcpy(&w, p, 8), digit_mask(w) == HIGH))
        v = v * 100000000 + eight_digits(w), nd += 8, p += 8, a = 1;
    for (; p < e && DIGIT(*p); p++, a = 1)
        if (++nd > most) ok = 0;
        else v = v * 10 + (uint64_t)(*p - '0');
    if (p < e && *p == '.') {
        pt = 1;
        p++;
        if (v == 0)
            while (p < e && *p == '0') p++, x--, a = 1;
        while (SWAR_DIGITS && nd + 8 <= most && e - p >= 8 && (memcpy(&w, p, 8), digit_mask(w) == HIGH))
            v = v * 100000000 + eight_digits(w), nd += 8, x -= 8, p += 8, a = 1;
        for (; p < e && DIGIT(*p); p++, x--, a = 1)
            if (++nd > most) ok = 0;
            else v = v * 10 + (uint64_t)(*p - '0');
    }
    *m = v;
    *exp10 = x;
    *any = a;
    *fine = ok;
    if (ndig) *ndig = nd;
    if (point) *point = pt;
    return p;
}

/* A decimal ([+-] mantissa [(e|E)[+-]digits]) at p, never past e: returns where it ends; *neg,
 * and mantissa's *m, *exp10 (the exponent added), *any, *fine (0 too when an exponent mark has
 * no digits: the decimal then ends before the mark), for mantissas of at most `most` digits;
 * *mark 1 when it has a point or an exponent. */
static inline const uint8_t *decimal(const uint8_t *p, const uint8_t *e, int *neg, uint64_t *m, int *exp10, int *any,
                              int *fine, int most, int *ndig, int *mark) {
    int point;
    *neg = 0;
    if (p < e && (*p == '+' || *p == '-')) {
        *neg = *p == '-';
        p++;
    }
    p = mantissa(p, e, m, exp10, any, fine, most, ndig, &point);
    if (mark) *mark = point;
    if (*any && p < e && (*p == 'e' || *p == 'E')) {
        const uint8_t *q = p + 1;
        int eneg = 0;
        if (q < e && (*q == '+' || *q == '-')) {
            eneg = *q == '-';
            q++;
        }
        if (q < e && DIGIT(*q)) {
            int x = 0;
            while (q < e && DIGIT(*q)) {
                if (x < 100000) x = x * 10 + (*q - '0');
                q++;
            }
            *exp10 += eneg ? -x : x;
            p = q;
            if (mark) *mark = 1;
        } else {
            *fine = 0;
        }
    }
    return p;
}

/* The value that starts at s, read up to the pipe that ends it (never past e): returns the pipe
 * (NULL when the line has none), with *exact 1 and *out when the value, spaces trimmed, is a
 * plain decimal ([+-]digits[.digits][(e|E)[+-]digits], at most 15 significant digits, a power
 * of ten within 10^+-22) read exactly, else *exact 0 (the caller reads it). One pass: the number is parsed as it is
 * scanned, and memchr finds the pipe only after a value it could not read. */
static const uint8_t *scan_value(const uint8_t *s, const uint8_t *e, double *out, int *exact) {
    const uint8_t *p = s;
    *exact = 0;
    while (p < e && *p == ' ') p++;
    uint64_t m;
    int neg, exp10, any, fine;
    p = decimal(p, e, &neg, &m, &exp10, &any, &fine, 15, NULL, NULL);
    while (p < e && *p == ' ') p++;
    if (p < e && *p == PIPE) {
        if (any && fine && (m == 0 || (exp10 >= -22 && exp10 <= 22))) {
            double v = m == 0 ? 0.0 : exp10 < 0 ? (double)m / P10[-exp10] : (double)m * P10[exp10];
            *out = neg ? -v : v;
            *exact = 1;
        }
        return p;
    }
    return p < e ? memchr(p, PIPE, (size_t)(e - p)) : NULL;
}

/* A value nobody reads (a key the series does not keep), from s to its pipe (NULL when none):
 * *plain 1 when it holds only what a plain number and its padding are made of
 * (" 0123456789+-.eE"), so that it can hold no literal another parser needs; else 0 (the
 * caller looks at it). */
static const uint8_t *scan_plain(const uint8_t *s, const uint8_t *e, int *plain) {
    for (; s < e; s++) {
        uint8_t c = *s;
        if (c == PIPE) {
            *plain = 1;
            return s;
        }
        if (!(DIGIT(c) || c == ' ' || c == '.' || c == '+' || c == '-' || c == 'e' || c == 'E')) {
            *plain = 0;
            return memchr(s, PIPE, (size_t)(e - s));
        }
    }
    *plain = 1;
    return NULL;
}

/* A step/total counter window, spaces trimmed: plain digits, no sign, no leading zero, below
 * 2^53. 1 and *out when so. */
static int read_counter(const uint8_t *s, const uint8_t *e, int64_t *out) {
    while (s < e && *s == ' ') s++;
    while (e > s && e[-1] == ' ') e--;
    int64_t len = e - s;
    if (len <= 0 || len > 16 || (len > 1 && *s == '0')) return 0;
    uint64_t v = 0;
    for (; s < e; s++) {
        if (!DIGIT(*s)) return 0;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (v >= (UINT64_C(1) << 53)) return 0;
    *out = (int64_t)v;
    return 1;
}

/* The candidate lines idx[0:ncand] laid out as one learnt Megatron layout, read.
 *
 * The layout: the head (line start to the first pipe, head_len bytes) with kind[j] 0 for a byte
 * that must equal head[j], 1 for a digit, 2 for a byte of a counter window (read below); then
 * nseg segments `|key value`, key k being keys[key_off[k]:key_off[k+1]] (through its colon),
 * the last followed by the pipe that ends the line. Counter windows are [w1a, w1b) and
 * [w2a, w2b) relative to the first pipe; the byte at w1a must be a space (`iteration\s+`).
 *
 * status[r]: 0 not this layout; 1 read (vals/vslow/counters filled); 2 this layout but a
 * counter is not plain (the line goes to the per-line parsers). Values are stored by segment,
 * vals[k*ncand + r] (a column per key), and read only where used[k]; vslow[r*nseg+k] = 1: value
 * k is not a plain decimal read here (for an unused one: holds more than number characters),
 * and the caller looks at it. tally[0]: the lines read; tally[1]: the values flagged. Returns
 * the lines of this layout. */
int64_t pdx_match(const uint8_t *b, const int64_t *starts, const int64_t *ends, const int64_t *idx, int64_t ncand,
                  const uint8_t *head, const uint8_t *kind, int64_t head_len, const uint8_t *keys,
                  const int64_t *key_off, const uint8_t *used, int64_t nseg, int64_t w1a, int64_t w1b, int64_t w2a, int64_t w2b,
                  int8_t *status, double *vals, uint8_t *vslow, int64_t *counters, int64_t *tally) {
    int64_t hits = 0, read = 0, slows = 0;
    /* The head checked 8 bytes at a time (heads of 8 bytes or more; the last word ends with the
     * head): fixed bytes equal, digit wildcards digits (per byte y = c ^ '0' is a digit iff its
     * high nibble is 0 and its low nibble + 6 does not carry into bit 4). */
    enum { MAXW = 64 };
    uint64_t wfix[MAXW], wval[MAXW], wdig[MAXW];
    int64_t woff[MAXW];
    int64_t nw = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const int words = 1;
#else
    const int words = 0; /* the masks below are laid out little-endian: bytes one at a time */
#endif
    if (words && head_len >= 8 && head_len <= 8 * MAXW) {
        for (int64_t off = 0; off < head_len; off += 8) {
            int64_t o = off + 8 <= head_len ? off : head_len - 8;
            uint64_t fx = 0, vl = 0, dg = 0;
            for (int j = 0; j < 8; j++) {
                uint8_t k = kind[o + j];
                if (k == 0) {
                    fx |= (uint64_t)0xFF << (8 * j);
                    vl |= (uint64_t)head[o + j] << (8 * j);
                } else if (k == 1) {
                    dg |= (uint64_t)0xFF << (8 * j);
                }
            }
            woff[nw] = o;
            wfix[nw] = fx;
            wval[nw] = vl;
            wdig[nw] = dg;
            nw++;
        }
    }
    /* Keys of 8 bytes or more compared 8 bytes at a time (the last word ends with the key). */
    enum { MAXKW = 512 };
    uint64_t kw_val[MAXKW];
    int64_t kw_off[MAXKW], kw_first[MAXW + 1];
    int kwords = words && nseg <= MAXW;
    if (kwords) {
        int64_t nkw = 0;
        for (int64_t k = 0; k < nseg && kwords; k++) {
            kw_first[k] = nkw;
            int64_t klen = key_off[k + 1] - key_off[k];
            for (int64_t off = 0; klen >= 8 && off < klen; off += 8) {
                if (nkw >= MAXKW) { kwords = 0; break; }
                int64_t o = off + 8 <= klen ? off : klen - 8;
                memcpy(&kw_val[nkw], keys + key_off[k] + o, 8);
                kw_off[nkw] = o;
                nkw++;
            }
        }
        kw_first[nseg] = nkw;
    }
    const uint64_t ONES_30 = UINT64_C(0x3030303030303030), HI = UINT64_C(0xF0F0F0F0F0F0F0F0),
                   LO = UINT64_C(0x0F0F0F0F0F0F0F0F), SIX = UINT64_C(0x0606060606060606),
                   B4 = UINT64_C(0x1010101010101010);
    for (int64_t r = 0; r < ncand; r++) {
        int64_t i = idx[r];
        int64_t s = starts[i], e = ends[i];
        status[r] = 0;
        if (e - s <= head_len) continue;
        int64_t p0 = s + head_len;
        if (b[p0] != PIPE || memchr(b + s, PIPE, (size_t)head_len) != NULL) continue;
        int ok = 1;
        if (nw) {
            for (int64_t w = 0; w < nw; w++) {
                uint64_t x;
                memcpy(&x, b + s + woff[w], 8);
                uint64_t y = x ^ ONES_30;
                if (((x ^ wval[w]) & wfix[w]) | (((y & HI) | (((y & LO) + SIX) & B4)) & wdig[w])) { ok = 0; break; }
            }
        } else {
            for (int64_t j = 0; j < head_len; j++) {
                uint8_t c = b[s + j];
                if (kind[j] == 0) {
                    if (c != head[j]) { ok = 0; break; }
                } else if (kind[j] == 1) {
                    if (!DIGIT(c)) { ok = 0; break; }
                }
            }
        }
        if (!ok || b[p0 + w1a] != ' ') continue;
        int64_t pos = p0;
        uint8_t *slow = vslow + r * nseg;
        const uint8_t *le = b + e;
        for (int64_t k = 0; k < nseg; k++) {
            int64_t klen = key_off[k + 1] - key_off[k];
            if (pos + 1 + klen > e) { ok = 0; break; }
            const uint8_t *kp = b + pos + 1;
            if (kwords) {
                for (int64_t w = kw_first[k]; w < kw_first[k + 1]; w++) {
                    uint64_t x;
                    memcpy(&x, kp + kw_off[w], 8);
                    if (x != kw_val[w]) { ok = 0; break; }
                }
                if (!ok) break;
                if (klen < 8 && memcmp(kp, keys + key_off[k], (size_t)klen) != 0) { ok = 0; break; }
            } else if (memcmp(kp, keys + key_off[k], (size_t)klen) != 0) {
                ok = 0;
                break;
            }
            const uint8_t *q;
            int fine;
            if (used[k])
                q = scan_value(kp + klen, le, vals + k * ncand + r, &fine);
            else
                q = scan_plain(kp + klen, le, &fine);
            if (!q) { ok = 0; break; }
            slow[k] = (uint8_t)!fine;
            slows += !fine;
            pos = (int64_t)(q - b);
        }
        if (!ok || pos != e - 1) continue;
        hits++;
        if (!read_counter(b + p0 + w1a, b + p0 + w1b, counters + 2 * r)
            || !read_counter(b + p0 + w2a, b + p0 + w2b, counters + 2 * r + 1)) {
            status[r] = 2;
            continue;
        }
        status[r] = 1;
        read++;
    }
    tally[0] = read;   /* lines read (status 1) */
    tally[1] = slows;  /* values flagged, on lines of this layout */
    return hits;
}

/* One value as pdx_match reads it (for tests): 1 and *out when read exactly here, else 0. */
int pdx_number(const uint8_t *s, int64_t n, double *out) {
    uint8_t buf[257];
    if (n < 0 || n > 256 || memchr(s, PIPE, (size_t)n)) return 0;
    memcpy(buf, s, (size_t)n);
    buf[n] = PIPE;
    int exact;
    const uint8_t *q = scan_value(buf, buf + n + 1, out, &exact);
    return q == buf + n && exact;
}

/* ---- Line shapes (shapes.py): lines that differ only in their numbers ------------------------
 *
 * A line's shape is its bytes (a trailing '\r' dropped, as the per-line reader drops it) with
 * every run of digits replaced by one '1' whatever its length and digits; its zero shape keeps
 * the runs that are all zeros as they are (only the others made '1'). Lines of one shape have the
 * same bytes outside their digits and runs of digits at the same places between them:
 * shapes.py learns from one line of a shape what the parsers make of every line of it, and when
 * that depends on which numbers are zero, learns the zero shapes of its lines instead. A place
 * in a line maps to a place in its shape by taking off, for each run made one '1' before it, its
 * length less one (`locate` maps back). */

#define SHAPE_MAX 4096  /* longer lines get no shape */
#define RUNS_MAX 256    /* lines of a learnt shape with more runs of digits are read per line */

static uint64_t mix(uint64_t h, uint64_t x) {
    h ^= x;
    h *= UINT64_C(0x9E3779B97F4A7C15);
    return h ^ (h >> 29);
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && (defined(__GNUC__) || defined(__clang__))
#define FIRST_BYTE(mask) (__builtin_ctzll(mask) >> 3)  /* the lowest flagged byte of a word */
#else
#define FIRST_BYTE(mask) 0
#endif

/* The shape of [s, e) (its zero shape when `zeros`) into buf (e - s <= SHAPE_MAX), its length in
 * *m, and its hash (never 0; a zero shape's differs from a shape's of the same bytes). When
 * `cpos` is given, the runs it made one '1': where each starts in the shape (cpos[r]) and the
 * digits of the runs up to it past their first (cum[r]); their number in *nruns (-1 when more
 * than RUNS_MAX). */
static uint64_t shape_of(const uint8_t *s, const uint8_t *e, uint8_t *buf, int64_t *m, int zeros,
                         int64_t *cpos, int64_t *cum, int64_t *nruns) {
    int64_t n = e - s, i = 0, o = 0, r = 0, extra = 0;
    while (i < n) {
        if (i + 8 <= n) {  /* bytes before the first digit of the next 8 are copied as they are */
            uint64_t w, y, d;
            memcpy(&w, s + i, 8);
            y = w ^ UINT64_C(0x3030303030303030);  /* a digit's byte becomes 0..9 */
            d = (y - UINT64_C(0x0A0A0A0A0A0A0A0A)) & ~y & UINT64_C(0x8080808080808080);
            memcpy(buf + o, &w, 8);
            if (!d) {
                i += 8;
                o += 8;
                continue;
            }
            int64_t k = FIRST_BYTE(d);  /* (exact for the lowest flagged byte) */
            i += k;
            o += k;
        }
        uint8_t c = s[i];
        if (!DIGIT(c)) {
            buf[o++] = c;
            i++;
            continue;
        }
        int64_t j = i;
        int nz = 0;
        while (j < n && DIGIT(s[j])) nz |= s[j++] != '0';
        if (nz || !zeros) {
            if (cpos) {
                if (r < RUNS_MAX) {
                    cpos[r] = o;
                    extra += j - i - 1;
                    cum[r] = extra;
                }
                r++;
            }
            buf[o++] = '1';
        } else {
            memset(buf + o, '0', (size_t)(j - i));
            o += j - i;
        }
        i = j;
    }
    if (nruns) *nruns = r <= RUNS_MAX ? r : -1;
    *m = o;
    uint64_t h = mix(zeros ? UINT64_C(0x13198A2E03707344) : UINT64_C(0x243F6A8885A308D3), (uint64_t)o), w;
    for (i = 0; i + 8 <= o; i += 8) {
        memcpy(&w, buf + i, 8);
        h = mix(h, w);
    }
    if (i < o) {
        w = 0;
        memcpy(&w, buf + i, (size_t)(o - i));
        h = mix(h, w ^ UINT64_C(0xFF00000000000000));
    }
    return h ? h : 1;
}

/* The hash of the shape of [s, s+n) (its zero shape when `zeros`), as pdx_shapes works it out;
 * 0 when the line is too long for a shape. */
uint64_t pdx_shape_hash(const uint8_t *s, int64_t n, int zeros) {
    uint8_t buf[SHAPE_MAX];
    if (n > 0 && s[n - 1] == '\r') n--;
    if (n > SHAPE_MAX) return 0;
    int64_t m;
    return shape_of(s, s + n, buf, &m, zeros, NULL, NULL, NULL);
}

/* Shape `h` (of bytes buf[0:m]) in a table of known shapes: an open-addressing table of mask + 1
 * slots (keys[slot] a shape hash, 0 for an empty slot; vals[slot] its shape's number), shape t's
 * bytes being skel[skel_off[t]:skel_off[t+1]]. Its number, or -1. */
static int32_t find_shape(uint64_t h, const uint8_t *buf, int64_t m, const uint64_t *keys, const int32_t *vals,
                          int64_t mask, const uint8_t *skel, const int64_t *skel_off) {
    if (mask < 0) return -1;
    for (int64_t slot = (int64_t)(h & (uint64_t)mask);; slot = (slot + 1) & mask) {
        if (keys[slot] == 0) return -1;
        if (keys[slot] != h) continue;
        int32_t t = vals[slot];
        if (skel_off[t + 1] - skel_off[t] == m && !memcmp(skel + skel_off[t], buf, (size_t)m)) return t;
    }
}

/* A decimal of 16 to 19 significant digits m and a power of ten within 10^+-27, read in one
 * x87 extended operation where long double has a 64-bit significand (m and 10^k, k <= 27, are
 * exact there; the quotient or product is rounded once to 64 bits, its value in the normal
 * double range). Rounding that to a double gives float()'s result unless it lies exactly halfway
 * between two doubles (its 11 bits below a double's significand 10000000000): the exact value
 * may then be on either side, and 0 is returned (strtod reads it). 0 too on other platforms. */
#if defined(__x86_64__) && defined(LDBL_MANT_DIG) && LDBL_MANT_DIG == 64
static const long double P10L[28] = {1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,  1e7L,  1e8L,  1e9L,
                                     1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L,
                                     1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L};

static int extended(uint64_t m, int exp10, int neg, double *out) {
    if (m == 0 || exp10 < -27 || exp10 > 27) return 0;
    long double r = exp10 < 0 ? (long double)m / P10L[-exp10] : (long double)m * P10L[exp10];
    uint64_t sig;
    memcpy(&sig, &r, sizeof sig);  /* (x87 layout: the 64-bit significand first) */
    if ((sig & 0x7FF) == 0x400) return 0;
    double v = (double)r;
    *out = neg ? -v : v;
    return 1;
}
#else
static int extended(uint64_t m, int exp10, int neg, double *out) {
    (void)m, (void)exp10, (void)neg, (void)out;
    return 0;
}
#endif

/* The place in the line of place c of its shape (runs as shape_of gives them): c plus the
 * extra digits of the runs that start before c. */
static int64_t locate(int64_t c, const int64_t *cpos, const int64_t *cum, int64_t nruns) {
    int64_t lo = 0, hi = nruns;  /* the number of runs starting before c */
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (cpos[mid] < c) lo = mid + 1;
        else hi = mid;
    }
    return c + (lo ? cum[lo - 1] : 0);
}

/* Token [p, p+len) read exactly as float() reads it, into *o: a plain decimal
 * ([+-]digits[.digits][(e|E)[+-]digits], or .digits) of at most 15 significant digits and a power
 * of ten within 10^+-22 in one IEEE operation on two exact doubles; a longer one (what Python's
 * repr prints for a double has 17) by `extended` when it can, else with strtod (a locale whose
 * decimal point is not '.' stops strtod early: 0). 0 when it is no such decimal, or an integer of
 * 2^53 or more (a double may not hold it and the parsers may read it as an int): the line goes to
 * the parsers. */
static int read_token(const uint8_t *p, int64_t len, double *o) {
    uint64_t m;
    int neg, exp10, any, fine, nd, mark;
    if (len <= 0 || decimal(p, p + len, &neg, &m, &exp10, &any, &fine, 19, &nd, &mark) != p + len || !any) return 0;
    if (fine && nd <= 15 && (m == 0 || (exp10 >= -22 && exp10 <= 22))) {
        double v = m == 0 ? 0.0 : exp10 < 0 ? (double)m / P10[-exp10] : (double)m * P10[exp10];
        *o = neg ? -v : v;
        return 1;
    }
    char buf[72];
    if (len >= (int64_t)sizeof buf) return 0;
    if (!(fine && extended(m, exp10, neg, o))) {
        memcpy(buf, p, (size_t)len);
        buf[len] = 0;
        char *end;
        double v = strtod(buf, &end);
        if (end != buf + len) return 0;
        *o = v;
    }
    return mark || (*o < 9007199254740992.0 && *o > -9007199254740992.0);
}

/* One token as read_token reads it (for tests): 1 and *out when read exactly, else 0. */
int pdx_token(const uint8_t *s, int64_t n, double *out) {
    return n > 0 && read_token(s, n, out);
}

/* The tokens of line [s, e) of shape t (runs as shape_of gives them) into out[0..]: shape t's
 * tokens are tok_off[t] .. tok_off[t+1]-1, token k being the tok_len[k] bytes of the shape at
 * tok_at[k] (mapped to the line: `locate`), each read by read_token; 0 when one is not (the
 * line goes to the parsers). */
static int read_tokens(const uint8_t *s, int32_t t, const int64_t *tok_off, const int64_t *tok_at,
                       const int64_t *tok_len, const int64_t *cpos, const int64_t *cum, int64_t nruns, double *out) {
    for (int64_t k = tok_off[t], j = 0; k < tok_off[t + 1]; k++, j++) {
        int64_t a = locate(tok_at[k], cpos, cum, nruns), z = locate(tok_at[k] + tok_len[k], cpos, cum, nruns);
        if (!read_token(s + a, z - a, out + j)) return 0;
    }
    return 1;
}

/* ---- The lines' cache: lines of a learnt shape by their exact bytes -----------------------
 *
 * Most lines of a long log have the exact layout of a line seen a moment before: the same bytes
 * but for their digits, which are where they were. Such a line's key is its bytes with every
 * digit made '1'; the cache (direct-mapped, one per scan thread and table, CACHE_SLOTS slots)
 * maps a key to the learnt shape its lines have (a shape looked up without zero shapes: lines of
 * one key have one shape) and to where its tokens are in them, so that a line found there is
 * read without working out its shape. */

#define CACHE_KEY 512    /* longer lines are not cached */

/* The key of [s, s+n) into buf (n <= CACHE_KEY; NULL: only its hash, any length), and its hash
 * (never 0). */
static uint64_t line_key(const uint8_t *s, int64_t n, uint8_t *buf) {
    uint64_t h = mix(UINT64_C(0x452821E638D01377), (uint64_t)n), w, full;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        full = (digit_mask(w) >> 7) * 0xFF;
        w = (w & ~full) | (ONES * '1' & full);
        if (buf) memcpy(buf + i, &w, 8);
        h = mix(h, w);
    }
    if (i < n) {
        w = 0;
        memcpy(&w, s + i, (size_t)(n - i));
        full = (digit_mask(w) >> 7) * 0xFF;  /* (the padding's zero bytes are no digits) */
        w = (w & ~full) | (ONES * '1' & full);
        if (buf) memcpy(buf + i, &w, (size_t)(n - i));
        h = mix(h, w ^ UINT64_C(0xFF00000000000000));
    }
    return h ? h : 1;
}

/* The tokens of a line at the byte offsets `at`, `len` (as the cache holds them) into out
 * (read_token); 0 when one is not read. */
static int read_at(const uint8_t *s, int64_t ntok, const int32_t *at, const int32_t *len, double *out) {
    for (int64_t j = 0; j < ntok; j++)
        if (!read_token(s + at[j], len[j], out + j)) return 0;
    return 1;
}

/* The shapes of lines idx[0:n] looked up in a table of known shapes (see find_shape): a line's
 * shape, and when the table has it as depending on zeros (redirect[t]), its zero shape.
 * hashes[i]: the hash of the one looked up last (0: too long for a shape); tid[i]: its number,
 * or -1 when not in the table. When `out` is given, the numbers of the lines of shapes that read
 * them (reads[t]) are read in the same pass (read_tokens, with the runs shape_of found): token j
 * of line i in out[i*width + j], slow[i] = 1 when one is not read or the line has more than
 * RUNS_MAX runs (the line goes to the parsers); and with a cache of cslots slots (a power of two;
 * 0: none), lines whose key it holds are read from it, and the others' keys are put in it (see
 * line_key), those of a line of no shape too, for a table of `ntpl` shapes. */
void pdx_shapes(const uint8_t *b, const int64_t *starts, const int64_t *ends, const int64_t *idx, int64_t n,
                const uint64_t *keys, const int32_t *vals, int64_t mask, const uint8_t *skel,
                const int64_t *skel_off, const uint8_t *redirect, uint64_t *hashes, int32_t *tid,
                const uint8_t *reads, const int64_t *tok_off, const int64_t *tok_at, const int64_t *tok_len,
                int64_t width, double *out, uint8_t *slow, int64_t cslots, uint64_t *ckey, uint64_t *chash,
                int32_t *ctid, int32_t *clen, uint8_t *cbytes, int32_t *ctok_at, int32_t *ctok_len, int64_t ntpl) {
    uint8_t buf[SHAPE_MAX], kbuf[CACHE_KEY];
    int64_t cpos[RUNS_MAX], cum[RUNS_MAX];
    int64_t *cp = out ? cpos : NULL;
    int cache = out && cslots > 0;
    /* A line of no shape of the table is cached as `miss`, which names the table's size: a line
     * of a shape learnt later (a table of more shapes) is then looked up again. */
    const int32_t miss = (int32_t)(-2 - ntpl);
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *s = b + starts[idx[i]], *e = b + ends[idx[i]];
        if (e > s && e[-1] == '\r') e--;
        tid[i] = -1;
        hashes[i] = 0;
        if (out) slow[i] = 0;
        if (e - s > SHAPE_MAX) continue;
        int64_t slot = -1;
        uint64_t key = 0;
        if (cache && e - s <= CACHE_KEY) {
            key = line_key(s, e - s, kbuf);
            slot = (int64_t)(key & (uint64_t)(cslots - 1));
            int32_t t = ctid[slot];
            if (ckey[slot] == key && (t >= 0 || t == miss) && clen[slot] == e - s
                && !memcmp(cbytes + slot * CACHE_KEY, kbuf, (size_t)(e - s))) {
                hashes[i] = chash[slot];
                if (t < 0) continue;  /* (tid[i] stays -1) */
                tid[i] = t;
                if (reads[t] && tok_off[t + 1] > tok_off[t])
                    slow[i] = !read_at(s, tok_off[t + 1] - tok_off[t], ctok_at + slot * width, ctok_len + slot * width,
                                       out + i * width);
                continue;
            }
        }
        int64_t m, nruns = 0;
        uint64_t h = shape_of(s, e, buf, &m, 0, cp, cum, &nruns);
        int32_t t = find_shape(h, buf, m, keys, vals, mask, skel, skel_off);
        int zero = 0;
        if (t >= 0 && redirect[t]) {
            zero = 1;
            h = shape_of(s, e, buf, &m, 1, cp, cum, &nruns);
            t = find_shape(h, buf, m, keys, vals, mask, skel, skel_off);
        }
        hashes[i] = h;
        tid[i] = t;
        if (out && t >= 0 && reads[t] && tok_off[t + 1] > tok_off[t])
            slow[i] = nruns < 0 || !read_tokens(s, t, tok_off, tok_at, tok_len, cpos, cum, nruns, out + i * width);
        if (slot >= 0 && t < 0 && !zero) {  /* a line of no learnt shape: remembered as such */
            ckey[slot] = key;
            chash[slot] = h;
            ctid[slot] = miss;
            clen[slot] = (int32_t)(e - s);
            memcpy(cbytes + slot * CACHE_KEY, kbuf, (size_t)(e - s));
        } else if (slot >= 0 && t >= 0 && !zero && nruns >= 0 && tok_off[t + 1] - tok_off[t] <= width) {
            /* remember the key: its lines have shape t, their tokens where this line has them */
            ckey[slot] = key;
            chash[slot] = h;
            ctid[slot] = t;
            clen[slot] = (int32_t)(e - s);
            memcpy(cbytes + slot * CACHE_KEY, kbuf, (size_t)(e - s));
            for (int64_t k = tok_off[t], j = 0; k < tok_off[t + 1]; k++, j++) {
                int64_t a = locate(tok_at[k], cpos, cum, nruns), z = locate(tok_at[k] + tok_len[k], cpos, cum, nruns);
                ctok_at[slot * width + j] = (int32_t)a;
                ctok_len[slot * width + j] = (int32_t)(z - a);
            }
        }
    }
}

/* ---- OLMo console records (formats/olmo.py), read in bulk ------------------------------------
 *
 * A record is a header line holding `[step=N/(M|???),epoch=E` and the indented `key=value` lines
 * that follow it (`^\s{2,}([^=]+?)=(\S+)\s*$`). pdx_olmo sorts lines idx[0:n] (a trailing '\r'
 * left out, as the per-line reader leaves it out) as the parser's regular expressions see them:
 *   kind[i] = 0: neither;
 *             1: a header: step[i] and epoch[i] from the first `[step=` at which the whole header
 *                reads, and hash[i], the hash of the line's shape (pdx_shape_hash's);
 *             2: a body line: field[i], the code of its key (code[k] of the first key k that the
 *                key, stripped, is, or starts with when prefix[k]; 0 for none) and, for a key with
 *                a code, its value in val[i] with vok[i] = 1 when read exactly as float() reads it
 *                (else 0: the caller reads it); lit[i] = 1 when it holds one of the literals
 *                (has_literal: the other parsers' that see such a line);
 *             3: left to the parsers: a line that may be either holding a byte that is not
 *                printable ASCII or a tab (Python's \s and \d take more than ASCII's do), a line
 *                that is both a header and a body line, a counter of more than 15 digits, or a
 *                header too long for a shape.
 * (A line of kind 0 or 3 ends a chain: what is left to the parsers is anything not 1 or 2.)
 * Keys: key_blob[key_off[k]:key_off[k+1]] for k < nkeys. */
/* A blank, as Python's \s and str.strip see one in a line of printable ASCII and tabs. */
static int blank(uint8_t c) { return c == ' ' || c == '\t'; }

/* Whether [s, e) holds only printable ASCII and tabs (8 bytes at a time: a byte below 0x20 or
 * above 0x7e flags its word, which is then looked at byte by byte). */
static int printable(const uint8_t *s, const uint8_t *e) {
    const uint8_t *p = s;
    for (; p + 8 <= e; p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t low = (w - ONES * 0x20) & ~w & HIGH, high = ((w + ONES * (127 - 0x7e)) | w) & HIGH;
        if (!(low | high)) continue;
        for (int k = 0; k < 8; k++)
            if ((p[k] < 0x20 && p[k] != '\t') || p[k] > 0x7e) return 0;
    }
    for (; p < e; p++)
        if ((*p < 0x20 && *p != '\t') || *p > 0x7e) return 0;
    return 1;
}

/* Whether [s, e) holds one of the literals blob[off[k]:off[k+1]]. Those of four bytes or more
 * are found by their first four (pre[], sorted, as native-endian words; pre_lit[] the literal of
 * each) with Wu-Manber's skips: a window of four bytes moves on by shift[its last two bytes, as
 * b[2] | b[3] << 8] (how far from the end of a prefix those two bytes are, at most 3), and is
 * looked up when that is 0. The shorter ones (short_lit[0:nshort]) are found with memchr. (The
 * arrays: native.Literals.) */
typedef struct {
    const uint8_t *blob;
    const int64_t *off;
    const uint32_t *pre;
    const int32_t *pre_lit;
    int64_t npre;
    const uint8_t *shift;
    const int32_t *short_lit;
    int64_t nshort;
} Lits;

static int has_literal(const uint8_t *s, const uint8_t *e, const Lits *l) {
    const uint8_t *blob = l->blob, *shift = l->shift;
    const int64_t *off = l->off, npre = l->npre;
    const uint32_t *pre = l->pre;
    const int32_t *pre_lit = l->pre_lit;
    if (npre) {
        for (const uint8_t *p = s; p + 4 <= e;) {
            uint8_t sh = shift[p[2] | (p[3] << 8)];
            if (sh) {
                p += sh;
                continue;
            }
            uint32_t w;
            memcpy(&w, p, 4);
            int64_t lo = 0, hi = npre;
            while (lo < hi) {
                int64_t mid = (lo + hi) / 2;
                if (pre[mid] < w) lo = mid + 1;
                else hi = mid;
            }
            for (; lo < npre && pre[lo] == w; lo++) {
                int64_t k = pre_lit[lo], l = off[k + 1] - off[k];
                if (e - p >= l && !memcmp(p, blob + off[k], (size_t)l)) return 1;
            }
            p++;
        }
    }
    for (int64_t j = 0; j < l->nshort; j++) {
        int64_t k = l->short_lit[j];
        if (next_literal(s, e, blob + off[k], off[k + 1] - off[k]) != NULL) return 1;
    }
    return 0;
}

/* The header in [s, e): 1 (and *step, *epoch), 0 when there is none, -1 when its counters are
 * too long to be read here. */
static int olmo_header(const uint8_t *s, const uint8_t *e, int64_t *step, double *epoch) {
    for (const uint8_t *q = s; (q = next_literal(q, e, (const uint8_t *)"[step=", 6)) != NULL; q++) {
        const uint8_t *d = q + 6, *x = d;
        while (x < e && DIGIT(*x)) x++;
        if (x == d || x >= e || *x != '/') continue;
        const uint8_t *y = x + 1, *t = y;
        while (t < e && DIGIT(*t)) t++;
        if (t == y) {
            if (e - y < 3 || y[0] != '?' || y[1] != '?' || y[2] != '?') continue;
            t = y + 3;
        }
        if (e - t < 7 || memcmp(t, ",epoch=", 7)) continue;
        const uint8_t *u = t + 7, *v = u;
        while (v < e && DIGIT(*v)) v++;
        if (v == u) continue;
        if (x - d > 15 || v - u > 15) return -1;
        int64_t a = 0;
        for (; d < x; d++) a = a * 10 + (*d - '0');
        int64_t c = 0;
        for (; u < v; u++) c = c * 10 + (*u - '0');
        *step = a;
        *epoch = (double)c;
        return 1;
    }
    return 0;
}

void pdx_olmo(const uint8_t *b, const int64_t *starts, const int64_t *ends, const int64_t *idx, int64_t n,
              const uint8_t *key_blob, const int64_t *key_off, const int8_t *code, const uint8_t *prefix,
              int64_t nkeys, const uint8_t *lit_blob, const int64_t *lit_off, const uint32_t *pre,
              const int32_t *pre_lit, int64_t npre, const uint8_t *shift, const int32_t *short_lit, int64_t nshort,
              uint8_t *kind, int64_t *step, double *epoch, uint64_t *hash, int8_t *field,
              double *val, uint8_t *vok, uint8_t *lit) {
    Lits lits = {lit_blob, lit_off, pre, pre_lit, npre, shift, short_lit, nshort};
    uint8_t buf[SHAPE_MAX];
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *s = b + starts[idx[i]], *e = b + ends[idx[i]];
        if (e > s && e[-1] == '\r') e--;
        kind[i] = 0;
        field[i] = 0;
        vok[i] = 0;
        lit[i] = 0;
        /* (a line that starts with no two blanks and holds no header is neither, whatever its
         * bytes: such a line ends a chain, as one left to the parsers does) */
        int64_t st = 0;
        double ep = 0;
        int cand = e - s >= 4 && blank(s[0]) && blank(s[1]);
        int hdr = olmo_header(s, e, &st, &ep);
        if (!cand && !hdr) continue;
        if (!printable(s, e)) {
            kind[i] = 3;
            continue;
        }
        /* a body line: two blanks, a key (no '='), '=', a value (no blank), blanks */
        int body = 0;
        if (cand) {
            const uint8_t *eq = memchr(s, '=', (size_t)(e - s));
            if (eq != NULL && eq - s >= 3 && eq + 1 < e && !blank(eq[1])) {
                const uint8_t *v1 = eq + 1;
                while (v1 < e && !blank(*v1)) v1++;
                const uint8_t *t = v1;
                while (t < e && blank(*t)) t++;
                body = t == e;
                if (body) {
                    const uint8_t *ks = s, *ke = eq;
                    while (ks < ke && blank(*ks)) ks++;
                    while (ke > ks && blank(ke[-1])) ke--;
                    int64_t kl = ke - ks;
                    for (int64_t k = 0; k < nkeys; k++) {
                        int64_t l = key_off[k + 1] - key_off[k];
                        if ((prefix[k] ? kl >= l : kl == l) && !memcmp(ks, key_blob + key_off[k], (size_t)l)) {
                            field[i] = code[k];
                            break;
                        }
                    }
                    if (field[i]) vok[i] = (uint8_t)read_token(eq + 1, v1 - (eq + 1), val + i);
                }
            }
        }
        if (hdr < 0 || (hdr && body) || (hdr && e - s > SHAPE_MAX)) {
            kind[i] = 3;
            continue;
        }
        if (hdr) {
            int64_t m;
            kind[i] = 1;
            step[i] = st;
            epoch[i] = ep;
            hash[i] = shape_of(s, e, buf, &m, 0, NULL, NULL, NULL);
        } else if (body) {
            kind[i] = 2;
            lit[i] = (uint8_t)has_literal(s, e, &lits);
        }
    }
}

/* ---- Hard-wrapped Megatron records (formats/megatron.py), joined ---------------------------
 *
 * A record wrapped over several lines: a header line holding `iteration\s+\d+\s*[/]\s*\d+\s*\|`
 * that ends mid-field (after its last '|', a bare word: letters and spaces), then lines holding no
 * such header, up to the first one ending with '|' (at most `maxwrap` - 1 of them; the parser
 * emits the record there, its lines joined: the header right-stripped, the others stripped,
 * one space between). pdx_wrapped finds such records among the lines of a block not already read
 * (done[i] == 0), all of printable ASCII and tabs (Python's \s and str.strip take more), the
 * header holding none of the literals `hl` (every other parser's), the others none of `cl` (those
 * of the other parsers that see a line the Megatron parser swallows): per record, its first and
 * last lines (first[k], last[k]) and its joined text, into out (a line each, '\n' after each;
 * room for the block's size). Returns the number of records; *used: the bytes written.
 * With `cache` (the literals hold no digit: the caller says so), what is looked at in a line here
 * (printable bytes, the header, the literals) is worked out once per line key (line_key: the
 * line's bytes with each digit made '1', the same for every line that differs only in its
 * digits, and so is all of that): a table of WRAP_SLOTS keys for the call, a key told by its
 * 64-bit hash. */
#define WRAP_SLOTS 1024
#define WRAP_HEAD_KNOWN 1
#define WRAP_HEAD 2       /* a header line of a wrapped record (but for its tail) */
#define WRAP_BODY_KNOWN 4
#define WRAP_BODY 8       /* a line that may follow one */

/* The bits known of lines of key hash `h` (a slot of the table: direct-mapped, the last key wins). */
static uint8_t *wrap_slot(uint64_t *key, uint8_t *val, uint64_t h) {
    int64_t slot = (int64_t)(h & (WRAP_SLOTS - 1));
    if (key[slot] != h) {
        key[slot] = h;
        val[slot] = 0;
    }
    return val + slot;
}

/* Whether [s, e) holds `iteration\s+\d+\s*\/\s*\d+\s*\|`. */
static int meg_header(const uint8_t *s, const uint8_t *e) {
    for (const uint8_t *q = s; (q = next_literal(q, e, (const uint8_t *)"iteration", 9)) != NULL; q++) {
        const uint8_t *x = q + 9;
        if (x >= e || !blank(*x)) continue;
        while (x < e && blank(*x)) x++;
        const uint8_t *d = x;
        while (x < e && DIGIT(*x)) x++;
        if (x == d) continue;
        while (x < e && blank(*x)) x++;
        if (x >= e || *x != '/') continue;
        x++;
        while (x < e && blank(*x)) x++;
        d = x;
        while (x < e && DIGIT(*x)) x++;
        if (x == d) continue;
        while (x < e && blank(*x)) x++;
        if (x < e && *x == '|') return 1;
    }
    return 0;
}

int64_t pdx_wrapped(const uint8_t *b, const int64_t *starts, const int64_t *ends, int64_t n, const uint8_t *done,
                    int64_t maxwrap,
                    const uint8_t *hblob, const int64_t *hoff, const uint32_t *hpre, const int32_t *hpre_lit,
                    int64_t hnpre, const uint8_t *hshift, const int32_t *hshort, int64_t hnshort,
                    const uint8_t *cblob, const int64_t *coff, const uint32_t *cpre, const int32_t *cpre_lit,
                    int64_t cnpre, const uint8_t *cshift, const int32_t *cshort, int64_t cnshort,
                    int64_t cache, int64_t *first, int64_t *last, uint8_t *out, int64_t *used) {
    Lits hl = {hblob, hoff, hpre, hpre_lit, hnpre, hshift, hshort, hnshort};
    Lits cl = {cblob, coff, cpre, cpre_lit, cnpre, cshift, cshort, cnshort};
    int64_t k = 0, o = 0;
    uint64_t skey[WRAP_SLOTS];
    uint8_t sval[WRAP_SLOTS];  /* per key: WRAP_* bits, those worked out so far */
    if (cache) memset(skey, 0, sizeof skey);
    for (int64_t i = 0; i < n; i++) {
        if (done[i]) continue;
        const uint8_t *s = b + starts[i], *e = b + ends[i];
        if (e > s && e[-1] == '\r') e--;
        const uint8_t *e0 = e;
        while (e > s && blank(e[-1])) e--;  /* (right-stripped) */
        if (e == s || !((e[-1] >= 'A' && e[-1] <= 'Z') || (e[-1] >= 'a' && e[-1] <= 'z'))  /* (no bare word) */
            || memchr(s, PIPE, (size_t)(e - s)) == NULL)
            continue;
        /* the tail after the last '|': a bare word */
        const uint8_t *t = e;
        while (t > s && t[-1] != PIPE) t--;
        if (t == s) continue;
        const uint8_t *u = t;
        while (u < e && blank(*u)) u++;
        int word = u < e;
        for (const uint8_t *p = u; p < e && word; p++)
            word = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == ' ';
        if (!word) continue;
        uint64_t h = cache ? line_key(s, e0 - s, NULL) : 0;
        uint8_t *known = h ? wrap_slot(skey, sval, h) : NULL;
        if (known && (*known & WRAP_HEAD_KNOWN)) {
            if (!(*known & WRAP_HEAD)) continue;
        } else {
            int head = printable(s, e0) && meg_header(s, e) && !has_literal(s, e0, &hl);
            if (known) *known |= WRAP_HEAD_KNOWN | (head ? WRAP_HEAD : 0);
            if (!head) continue;
        }
        /* the lines after it, up to one that ends with '|' */
        int64_t j = i + 1, c = -1;
        for (; j < n && j - i < maxwrap; j++) {
            const uint8_t *cs = b + starts[j], *ce = b + ends[j];
            if (ce > cs && ce[-1] == '\r') ce--;
            if (done[j]) break;
            uint64_t hj = cache ? line_key(cs, ce - cs, NULL) : 0;
            uint8_t *kj = hj ? wrap_slot(skey, sval, hj) : NULL;
            if (kj && (*kj & WRAP_BODY_KNOWN)) {
                if (!(*kj & WRAP_BODY)) break;
            } else {
                int body = printable(cs, ce) && !meg_header(cs, ce) && !has_literal(cs, ce, &cl);
                if (kj) *kj |= WRAP_BODY_KNOWN | (body ? WRAP_BODY : 0);
                if (!body) break;
            }
            while (ce > cs && blank(ce[-1])) ce--;
            if (ce > cs && ce[-1] == PIPE) {
                c = j;
                break;
            }
        }
        if (c < 0) continue;
        memcpy(out + o, s, (size_t)(e - s));
        o += e - s;
        for (j = i + 1; j <= c; j++) {
            const uint8_t *cs = b + starts[j], *ce = b + ends[j];
            if (ce > cs && ce[-1] == '\r') ce--;
            while (ce > cs && blank(ce[-1])) ce--;
            while (cs < ce && blank(*cs)) cs++;
            out[o++] = ' ';
            memcpy(out + o, cs, (size_t)(ce - cs));
            o += ce - cs;
        }
        out[o++] = '\n';
        first[k] = i;
        last[k] = c;
        k++;
        i = c;
    }
    *used = o;
    return k;
}

/* ---- nanotron iteration lines (formats/minor.py: NanotronParser), in columns --------------------
 *
 * The parser reads a line holding `iteration: (\d+) / (\d+) \|` (its first match): the step, then,
 * from the segments after it (split at '|', each `key: value` at its first ':'; key and value
 * stripped; the last of a key wins), lm_loss, lr and grad_norm (parse_num). pdx_nanotron reads such
 * lines among lines of a block not done (done[i] == 0) that the per-line reader would read the
 * same way here: printable ASCII and tabs (Python's \d, \s and strip take more), neither
 * Megatron's header nor its validation line in them (its parser, which sees every line holding
 * `iteration`, then reads nothing there), none of the literals `ol` (the other parsers': none of
 * them acts on the line), a step of at most 15 digits and every one
 * of the three values, where printed, a plain decimal read_token reads as float() does (NaN, Inf,
 * SI suffixes and the rest go to the parsers: the line is left). With `cache` (no literal holds a
 * digit), what is looked at in a line beyond its match and values is worked out once per line key
 * (line_key's hash, as pdx_wrapped keeps them). Per line read: idx[k] = the line,
 * step[k], val[3k..3k+2] = lm_loss, lr, grad_norm and has[3k..] = 1 where printed. Returns k. */
static int nano_key(const uint8_t *a, const uint8_t *z) {
    while (a < z && blank(*a)) a++;
    while (z > a && blank(z[-1])) z--;
    int64_t m = z - a;
    if (m == 7 && !memcmp(a, "lm_loss", 7)) return 1;
    if (m == 2 && !memcmp(a, "lr", 2)) return 2;
    if (m == 9 && !memcmp(a, "grad_norm", 9)) return 3;
    return 0;
}

int64_t pdx_nanotron(const uint8_t *b, const int64_t *starts, const int64_t *ends, int64_t n, const uint8_t *done,
                     const uint8_t *oblob, const int64_t *ooff, const uint32_t *opre, const int32_t *opre_lit,
                     int64_t onpre, const uint8_t *oshift, const int32_t *oshort, int64_t onshort,
                     int64_t cache, int64_t *idx, double *step, double *val, uint8_t *has) {
    Lits ol = {oblob, ooff, opre, opre_lit, onpre, oshift, oshort, onshort};
    int64_t k = 0;
    uint64_t skey[WRAP_SLOTS];
    uint8_t sval[WRAP_SLOTS];  /* per key: 1 worked out, 2 the line holds what leaves it to the parsers */
    if (cache) memset(skey, 0, sizeof skey);
    for (int64_t i = 0; i < n; i++) {
        if (done[i]) continue;
        const uint8_t *s = b + starts[i], *e = b + ends[i];
        if (e > s && e[-1] == '\r') e--;
        const uint8_t *x = NULL;
        uint64_t st = 0;
        int64_t nd = 0;
        for (const uint8_t *q = s; (q = next_literal(q, e, (const uint8_t *)"iteration: ", 11)) != NULL; q++) {
            const uint8_t *y = q + 11, *d = y;
            uint64_t t = 0;
            while (y < e && DIGIT(*y)) t = t * 10 + (uint64_t)(*y++ - '0');
            if (y == d || e - y < 3 || y[0] != ' ' || y[1] != '/' || y[2] != ' ') continue;
            const uint8_t *w = y + 3, *d2 = w;
            while (w < e && DIGIT(*w)) w++;
            if (w == d2 || e - w < 2 || w[0] != ' ' || w[1] != PIPE) continue;
            x = w + 2;  /* the first match ends here */
            st = t;
            nd = y - d;
            break;
        }
        if (x == NULL || nd > 15) continue;
        /* what else is looked at in the line is the same in every line of its key when no
         * literal holds a digit (the caller says so: `cache`) */
        uint8_t *known = cache ? wrap_slot(skey, sval, line_key(s, e - s, NULL)) : NULL;
        if (known && *known) {
            if (*known & 2) continue;
        } else {
            int left = !printable(s, e) || has_literal(s, e, &ol) || meg_header(s, e)
                       || next_literal(s, e, (const uint8_t *)"validation loss at iteration", 28) != NULL;
            if (known) *known = (uint8_t)(1 | (left ? 2 : 0));
            if (left) continue;
        }
        double v[3] = {0, 0, 0};
        uint8_t got[3] = {0, 0, 0};
        int ok = 1;
        while (ok) {  /* the segments after the match */
            const uint8_t *z = memchr(x, PIPE, (size_t)(e - x));
            if (z == NULL) z = e;
            const uint8_t *c = memchr(x, ':', (size_t)(z - x));
            if (c != NULL) {
                int f = nano_key(x, c);
                if (f) {
                    const uint8_t *a = c + 1, *y = z;
                    while (a < y && blank(*a)) a++;
                    while (y > a && blank(y[-1])) y--;
                    if (!read_token(a, y - a, &v[f - 1])) ok = 0;
                    got[f - 1] = 1;
                }
            }
            if (z == e) break;
            x = z + 1;
        }
        if (!ok) continue;
        idx[k] = i;
        step[k] = (double)st;
        for (int f = 0; f < 3; f++) {
            val[3 * k + f] = got[f] ? v[f] : 0.0;
            has[3 * k + f] = got[f];
        }
        k++;
    }
    return k;
}

/* ---- Folding points into windows (series.Windows.append) ---------------------------------------
 * Sums are taken in numpy's order so both paths give the same bits: np.add.reduceat over a window
 * a[0..m) is a[0] + pairwise(a[1..m)), numpy's pairwise summation (8 accumulators in blocks of up
 * to 128 values, halves above). Sums of 0/1 flags are exact in any order. Minimum and maximum keep
 * numpy's choice between equal values (the later one). */
static double pairwise(const double *a, int64_t n) {
    if (n < 8) {
        double r = -0.0;
        for (int64_t i = 0; i < n; i++) r += a[i];
        return r;
    }
    if (n <= 128) {
        double r[8];
        int64_t i;
        for (int j = 0; j < 8; j++) r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise(a, n2) + pairwise(a + n2, n - n2);
}

static double window_sum(const double *a, int64_t m) {
    return m == 1 ? a[0] : a[0] + pairwise(a + 1, m - 1);
}

/* Points [0, n) in windows of k (the last may be shorter): for window w, first[w] and last[w] are
 * its first and last step, and out[f * nw + w] field f of the window, f in the order count,
 * loss_sum, loss_n, loss_min, loss_max, loss_bad, nan_w, skipped_sum, skipped_n, gn_sum, gn_n,
 * gn_max, gn_bad, lr, loss_scale (see Windows.append for what each is). `tmp` has room for 4k
 * doubles. */
void pdx_fold(int64_t n, int64_t k, const int64_t *steps, const double *loss, const double *gn,
              const double *sk, const double *loss_bad, const double *gn_bad, const double *nan_iters,
              const double *lr, const double *scale, int64_t *first, int64_t *last, double *out, double *tmp) {
    int64_t nw = (n + k - 1) / k;
    double *tl = tmp, *tn = tmp + k, *ts = tmp + 2 * k, *tg = tmp + 3 * k;
    for (int64_t w = 0; w < nw; w++) {
        int64_t s = w * k, e = s + k < n ? s + k : n, m = e - s;
        double loss_n = 0, bad_n = 0, sk_n = 0, gn_n = 0, gbad_n = 0;
        double lmin = INFINITY, lmax = -INFINITY, gmax = -INFINITY;
        for (int64_t i = 0; i < m; i++) {
            int64_t p = s + i;
            double l = loss[p], g = gn[p], q = sk[p], v;
            int fl = isfinite(l), fg = isfinite(g), known = !isnan(q);
            int bad = loss_bad[p] != 0, gbad = gn_bad[p] != 0;
            tl[i] = fl ? l : 0.0;
            loss_n += fl;
            v = fl ? l : INFINITY;
            lmin = lmin < v ? lmin : v;
            v = fl ? l : -INFINITY;
            lmax = lmax > v ? lmax : v;
            bad_n += bad;
            /* nan_w: max(nan_to_num(nan_iters), bad or gn_bad) */
            double c = nan_iters[p];
            c = isnan(c) ? 0.0 : isinf(c) ? (c > 0 ? DBL_MAX : -DBL_MAX) : c;
            double f = (bad || gbad) ? 1.0 : 0.0;
            tn[i] = c > f ? c : f;
            ts[i] = known ? q : 0.0;
            sk_n += known;
            tg[i] = fg ? g : 0.0;
            gn_n += fg;
            v = fg ? g : -INFINITY;
            gmax = gmax > v ? gmax : v;
            gbad_n += gbad;
        }
        first[w] = steps[s];
        last[w] = steps[e - 1];
        double *o = out + w;
        o[0 * nw] = (double)m;
        o[1 * nw] = window_sum(tl, m);
        o[2 * nw] = loss_n;
        o[3 * nw] = lmin;
        o[4 * nw] = lmax;
        o[5 * nw] = bad_n;
        o[6 * nw] = window_sum(tn, m);
        o[7 * nw] = window_sum(ts, m);
        o[8 * nw] = sk_n;
        o[9 * nw] = window_sum(tg, m);
        o[10 * nw] = gn_n;
        o[11 * nw] = gmax;
        o[12 * nw] = gbad_n;
        o[13 * nw] = lr[e - 1];
        o[14 * nw] = scale[e - 1];
    }
}

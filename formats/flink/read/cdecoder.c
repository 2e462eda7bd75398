/*
 * formats.flink.read.cdecoder: the commonest key groups of Flink's keyed state streams,
 * decoded in C (issue 45: a million entries a second).
 *
 * The same decoding as the pure-Python readers (formats/flink/read/keyed.py for the heap and
 * canonical key-group layouts, pairs.py for a canonical pair, types/codecs.py and
 * java/input.py for the values), for the states whose every part is a primitive Flink writes
 * in fixed bytes or a String: keys String, Integer, Long, Short, Byte, Boolean, Float,
 * Double; the void namespace; value, list and map state of those, and timers.
 *
 * It never reports a problem: anything it does not take exactly as the Python readers would
 * (a state it has no plan for, a null or non-ASCII String, a length that does not fit, bytes
 * left over, a key of another key group) makes it give up on the whole key group and return
 * None, and the Python readers decode that key group, say what is wrong and count what is
 * lost. So the Python readers stay the definition; this is a faster way to the same entries
 * (tests/test_speedups.py compares both on every fixture snapshot and on random streams).
 *
 * A plan per state (formats/flink/read/speedups.py builds it): a tuple
 *   (kind, key, namespace, value, user_key)
 * kind 0 value, 1 list, 2 map, 3 timers; the others are type codes (PRIMS below), namespace
 * 1 for the void namespace (the only one taken); None: no plan (the key group is given up).
 */
#include "cdecoder.h"

enum { K_VALUE = 0, K_LIST = 1, K_MAP = 2, K_TIMERS = 3 };
enum { T_NONE = 0, T_STRING = 1, T_I32 = 2, T_I64 = 3, T_I16 = 4, T_I8 = 5, T_BOOL = 6,
       T_F32 = 7, T_F64 = 8 };

#define MAX_STATES 4096

typedef struct {
    int ok;
    int kind, key, ns, value, user_key;
} Plan;

typedef struct {
    const unsigned char *data;
    Py_ssize_t pos, end;
} Cursor;


static inline uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t be64(const unsigned char *p) {
    return ((uint64_t)be32(p) << 32) | be32(p + 4);
}

static int fixed_size(int code) {
    switch (code) {
    case T_I32: case T_F32: return 4;
    case T_I64: case T_F64: return 8;
    case T_I16: return 2;
    case T_I8: case T_BOOL: return 1;
    default: return -1;
    }
}

/* StringValue.readString of a non-null ASCII string (DataReader.string_value): the length + 1
 * as a varint of 7-bit groups, low first (at most 5 bytes), then one byte per character. */
static int read_string(Cursor *c, PyObject **out) {
    Py_ssize_t pos = c->pos;
    uint64_t length = 0;
    int shift = 0;
    for (;;) {
        if (pos >= c->end) return GIVE_UP;
        unsigned char b = c->data[pos++];
        length |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) break;
        shift += 7;
        if (shift > 28) return GIVE_UP;
    }
    if (length == 0) return GIVE_UP;  /* null */
    length -= 1;
    if ((uint64_t)(c->end - pos) < length) return GIVE_UP;
    const unsigned char *p = c->data + pos;
    for (uint64_t i = 0; i < length; i++) {
        if (p[i] >= 0x80) return GIVE_UP;  /* not one byte per character */
    }
    *out = PyUnicode_DecodeASCII((const char *)p, (Py_ssize_t)length, NULL);
    if (*out == NULL) return ERROR;
    c->pos = pos + (Py_ssize_t)length;
    return TAKEN;
}

/* One value of type ``code`` (the codecs of types/codecs.py: DataReader.i32 ... f64). */
static int read_value(Cursor *c, int code, PyObject **out) {
    if (code == T_STRING) return read_string(c, out);
    int size = fixed_size(code);
    if (size < 0 || c->end - c->pos < size) return GIVE_UP;
    const unsigned char *p = c->data + c->pos;
    switch (code) {
    case T_I32: *out = PyLong_FromLong((long)(int32_t)be32(p)); break;
    case T_I64: *out = PyLong_FromLongLong((long long)(int64_t)be64(p)); break;
    case T_I16: *out = PyLong_FromLong((long)(int16_t)(((uint16_t)p[0] << 8) | p[1])); break;
    case T_I8: *out = PyLong_FromLong((long)(int8_t)p[0]); break;
    case T_BOOL: *out = PyBool_FromLong(p[0] != 0); break;
    case T_F32: {
        uint32_t bits = be32(p);
        float f;
        memcpy(&f, &bits, 4);
        *out = PyFloat_FromDouble((double)f);
        break;
    }
    case T_F64: {
        uint64_t bits = be64(p);
        double d;
        memcpy(&d, &bits, 8);
        *out = PyFloat_FromDouble(d);
        break;
    }
    default: return GIVE_UP;
    }
    if (*out == NULL) return ERROR;
    c->pos += size;
    return TAKEN;
}

/* The void namespace: one 0 byte (VoidNamespaceSerializer). */
static inline int read_void(Cursor *c) {
    if (c->pos >= c->end || c->data[c->pos] != 0) return GIVE_UP;
    c->pos += 1;
    return TAKEN;
}

static int parse_plans(PyObject *plans, Plan *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyTuple_GET_ITEM(plans, i);
        out[i].ok = 0;
        if (p == Py_None) continue;
        if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != 5) {
            PyErr_SetString(PyExc_TypeError, "a plan is a tuple of 5 ints or None");
            return -1;
        }
        int v[5];
        for (int j = 0; j < 5; j++) {
            long x = PyLong_AsLong(PyTuple_GET_ITEM(p, j));
            if (x == -1 && PyErr_Occurred()) return -1;
            v[j] = (int)x;
        }
        out[i].kind = v[0]; out[i].key = v[1]; out[i].ns = v[2]; out[i].value = v[3];
        out[i].user_key = v[4];
        out[i].ok = v[2] == 1 && v[1] != T_NONE && v[0] >= K_VALUE && v[0] <= K_TIMERS;
    }
    return 0;
}

/* Append (key_group, key, namespace, value) to ``out``; steals key and value. */
static int append_entry(PyObject *out, PyObject *key_group, PyObject *key, PyObject *ns,
                        PyObject *value) {
    PyObject *entry = PyTuple_New(4);
    if (entry == NULL) {
        Py_DECREF(key);
        Py_DECREF(value);
        return ERROR;
    }
    Py_INCREF(key_group);
    Py_INCREF(ns);
    PyTuple_SET_ITEM(entry, 0, key_group);
    PyTuple_SET_ITEM(entry, 1, key);
    PyTuple_SET_ITEM(entry, 2, ns);
    PyTuple_SET_ITEM(entry, 3, value);
    int failed = PyList_Append(out, entry);
    Py_DECREF(entry);
    return failed ? ERROR : TAKEN;
}

/* A timer (TimerSerializer): the timestamp with its sign bit flipped (MathUtils.flipSignBit),
 * the key, the namespace. */
static int read_timer(Cursor *c, const Plan *plan, PyObject **timestamp, PyObject **key) {
    if (c->end - c->pos < 8) return GIVE_UP;
    int64_t stamp = (int64_t)(be64(c->data + c->pos) ^ 0x8000000000000000ULL);
    c->pos += 8;
    int r = read_value(c, plan->key, key);
    if (r != TAKEN) return r;
    if ((r = read_void(c)) != TAKEN) {
        Py_DECREF(*key);
        return r;
    }
    *timestamp = PyLong_FromLongLong((long long)stamp);
    if (*timestamp == NULL) {
        Py_DECREF(*key);
        return ERROR;
    }
    return TAKEN;
}

/* ------------------------------------------------------------------------------------------
 * The canonical layout (keyed.py _decode_canonical, pairs.py pair_decoder)
 */

/* A canonical list value: elements separated by ',' (0x2C), no count. */
static int canonical_list(Cursor *v, int code, PyObject **out) {
    PyObject *list = PyList_New(0);
    if (list == NULL) return ERROR;
    while (v->pos < v->end) {
        PyObject *element;
        int r = read_value(v, code, &element);
        if (r != TAKEN) {
            Py_DECREF(list);
            return r;
        }
        int failed = PyList_Append(list, element);
        Py_DECREF(element);
        if (failed) {
            Py_DECREF(list);
            return ERROR;
        }
        if (v->pos < v->end) {
            if (v->data[v->pos] != 0x2C) {
                Py_DECREF(list);
                return GIVE_UP;
            }
            v->pos += 1;
            if (v->pos == v->end) {  /* a trailing ',': the Python reader says what is wrong */
                Py_DECREF(list);
                return GIVE_UP;
            }
        }
    }
    *out = list;
    return TAKEN;
}

typedef struct {
    PyObject *last;  /* the last entry appended for this state (in this key group) */
    const unsigned char *key;  /* its key and namespace bytes; NULL: compare it by value */
    Py_ssize_t key_len;
} MapRun;

/* Whether a map pair's key (``key``, its bytes at ``bytes``) is the last entry's, as pairs.py
 * compares them: the same key group, key and namespace. By bytes where known (the plans take
 * maps only of keys whose equal values have equal bytes), else by value; -1: an error. */
static int same_map_key(const MapRun *run, PyObject *key_group, PyObject *key, PyObject *ns,
                        const unsigned char *bytes, Py_ssize_t length) {
    if (run->last == NULL) return 0;
    if (run->key != NULL)
        return run->key_len == length && memcmp(run->key, bytes, (size_t)length) == 0;
    PyObject *last = run->last;
    if (!PyTuple_CheckExact(last) || PyTuple_GET_SIZE(last) != 4
            || !PyDict_CheckExact(PyTuple_GET_ITEM(last, 3)))
        return 0;
    int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(last, 0), key_group, Py_EQ);
    if (same == 1) same = PyObject_RichCompareBool(PyTuple_GET_ITEM(last, 1), key, Py_EQ);
    if (same == 1) same = PyObject_RichCompareBool(PyTuple_GET_ITEM(last, 2), ns, Py_EQ);
    return same;
}

/* One canonical pair: key ``k`` (after its key-group prefix), value ``v``. */
static int canonical_pair(const Plan *plan, Cursor *k, Cursor *v, PyObject *key_group,
                          PyObject *ns, PyObject *out, MapRun *run) {
    PyObject *key, *value;
    int r;
    if (plan->kind == K_TIMERS) {
        PyObject *stamp;
        if ((r = read_timer(k, plan, &stamp, &key)) != TAKEN) return r;
        if (k->pos != k->end) {
            Py_DECREF(stamp);
            Py_DECREF(key);
            return GIVE_UP;
        }
        return append_entry(out, key_group, key, ns, stamp);
    }
    Py_ssize_t key_at = k->pos;
    if (plan->kind == K_MAP && run->last != NULL && run->key != NULL
            && k->end - k->pos >= run->key_len
            && memcmp(k->data + k->pos, run->key, (size_t)run->key_len) == 0) {
        /* the last entry's key and namespace bytes again: they decode to the same key (the
         * bytes read are the same), so only the user key and value are read */
        k->pos += run->key_len;
        key = NULL;
    } else {
        if ((r = read_value(k, plan->key, &key)) != TAKEN) return r;
        if ((r = read_void(k)) != TAKEN) {
            Py_DECREF(key);
            return r;
        }
    }
    Py_ssize_t key_len = k->pos - key_at;
    if (plan->kind == K_MAP) {
        PyObject *user_key;
        if ((r = read_value(k, plan->user_key, &user_key)) != TAKEN) {
            Py_XDECREF(key);
            return r;
        }
        if (k->pos != k->end || v->pos >= v->end) {
            Py_XDECREF(key);
            Py_DECREF(user_key);
            return GIVE_UP;
        }
        unsigned char null = v->data[v->pos];
        v->pos += 1;
        if (null) {
            value = Py_None;
            Py_INCREF(value);
        } else if ((r = read_value(v, plan->value, &value)) != TAKEN) {
            Py_XDECREF(key);
            Py_DECREF(user_key);
            return r;
        }
        if (v->pos != v->end) {  /* bytes after a map value: the Python reader's to judge */
            Py_XDECREF(key);
            Py_DECREF(user_key);
            Py_DECREF(value);
            return GIVE_UP;
        }
        /* a key's user keys come one pair each, adjacent: extend the last entry's map */
        int same = key == NULL ? 1
                   : same_map_key(run, key_group, key, ns, k->data + key_at, key_len);
        if (same < 0) {
            Py_XDECREF(key);
            Py_DECREF(user_key);
            Py_DECREF(value);
            return ERROR;
        }
        if (same) {
            Py_XDECREF(key);
            int failed = PyDict_SetItem(PyTuple_GET_ITEM(run->last, 3), user_key, value);
            Py_DECREF(user_key);
            Py_DECREF(value);
            return failed ? ERROR : TAKEN;
        }
        PyObject *map = PyDict_New();
        if (map == NULL || PyDict_SetItem(map, user_key, value)) {
            Py_XDECREF(map);
            Py_DECREF(key);
            Py_DECREF(user_key);
            Py_DECREF(value);
            return ERROR;
        }
        Py_DECREF(user_key);
        Py_DECREF(value);
        if (append_entry(out, key_group, key, ns, map) != TAKEN) return ERROR;
        run->last = PyList_GET_ITEM(out, PyList_GET_SIZE(out) - 1);
        run->key = k->data + key_at;
        run->key_len = key_len;
        return TAKEN;
    }
    if (k->pos != k->end) {
        Py_DECREF(key);
        return GIVE_UP;
    }
    if (plan->kind == K_LIST) {
        r = canonical_list(v, plan->value, &value);
    } else {
        r = read_value(v, plan->value, &value);
        if (r == TAKEN && v->pos != v->end) {
            Py_DECREF(value);
            r = GIVE_UP;
        }
    }
    if (r != TAKEN) {
        Py_DECREF(key);
        return r;
    }
    return append_entry(out, key_group, key, ns, value);
}

static PyObject *runs_or_none(PyObject *runs, int r) {
    if (r == ERROR) {
        Py_DECREF(runs);
        return NULL;
    }
    if (r == GIVE_UP) {
        Py_DECREF(runs);
        Py_RETURN_NONE;
    }
    return runs;
}

static int add_run(PyObject *runs, Py_ssize_t state, Py_ssize_t start, Py_ssize_t end) {
    PyObject *run = Py_BuildValue("(nnn)", state, start, end);
    if (run == NULL) return ERROR;
    int failed = PyList_Append(runs, run);
    Py_DECREF(run);
    return failed ? ERROR : TAKEN;
}

/* canonical_group(data, pos, limit, key_group, prefix, plans, outs, void) -> runs | None
 *
 * The pairs of one key group from ``pos`` (its first state id) to its end-of-key-group mark,
 * within ``limit``; each state's entries appended to ``outs[state id]``. Returns the runs of
 * pairs read, ``(state id, start, end)`` each (a state's bytes), or None: not taken (what was
 * appended to ``outs`` is to be thrown away).
 */
static PyObject *canonical_group(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, limit, n_states;
    int key_group, prefix;
    PyObject *plans, *outs, *ns;
    if (!PyArg_ParseTuple(args, "y*nniiO!O!O", &buf, &pos, &limit, &key_group, &prefix,
                          &PyTuple_Type, &plans, &PyList_Type, &outs, &ns))
        return NULL;
    n_states = PyTuple_GET_SIZE(plans);
    if (n_states > MAX_STATES || PyList_GET_SIZE(outs) != n_states || limit > buf.len
            || pos < 0 || (prefix != 1 && prefix != 2)) {
        PyBuffer_Release(&buf);
        Py_RETURN_NONE;
    }
    Plan *plan = PyMem_Calloc((size_t)(n_states ? n_states : 1), sizeof(Plan));
    MapRun *maps = PyMem_Calloc((size_t)(n_states ? n_states : 1), sizeof(MapRun));
    PyObject *runs = PyList_New(0);
    PyObject *group = PyLong_FromLong(key_group);
    int r = TAKEN;
    if (plan == NULL || maps == NULL || runs == NULL || group == NULL) {
        if (plan == NULL || maps == NULL) PyErr_NoMemory();
        r = ERROR;
    } else if (parse_plans(plans, plan, n_states)) {
        r = ERROR;
    }
    const unsigned char *data = buf.buf;
    if (r == TAKEN && pos + 2 > limit) r = GIVE_UP;
    int state = r == TAKEN ? (int16_t)(((uint16_t)data[pos] << 8) | data[pos + 1]) : 0;
    pos += 2;
    while (r == TAKEN) {  /* one run of pairs of one state */
        if (state < 0 || state >= n_states || !plan[state].ok) {
            r = GIVE_UP;
            break;
        }
        PyObject *out = PyList_GET_ITEM(outs, state);
        Py_ssize_t run_start = pos;
        int more = 0;
        while (!more) {
            if (pos + 4 > limit) { r = GIVE_UP; break; }
            int32_t key_length = (int32_t)be32(data + pos);
            Py_ssize_t key_start = pos + 4;
            if (key_length < prefix || key_length > limit - key_start - 4) { r = GIVE_UP; break; }
            Py_ssize_t value_at = key_start + key_length;
            int32_t value_length = (int32_t)be32(data + value_at);
            Py_ssize_t value_start = value_at + 4;
            if (value_length < 0 || value_length > limit - value_start) { r = GIVE_UP; break; }
            pos = value_start + value_length;
            unsigned char first = data[key_start];
            more = first & 0x80;
            int stored = first & 0x7F;
            if (prefix == 2) stored = stored << 8 | data[key_start + 1];
            if (stored != key_group) { r = GIVE_UP; break; }
            Cursor k = {data, key_start + prefix, value_at};
            Cursor v = {data, value_start, pos};
            r = canonical_pair(&plan[state], &k, &v, group, ns, out, &maps[state]);
            if (r != TAKEN) break;
        }
        if (r != TAKEN) break;
        if ((r = add_run(runs, state, run_start, pos)) != TAKEN) break;
        if (pos + 2 > limit) { r = GIVE_UP; break; }
        int next = (int16_t)(((uint16_t)data[pos] << 8) | data[pos + 1]);
        pos += 2;
        if (next == -1) break;  /* END_OF_KEY_GROUP: 0xFFFF */
        state = next;  /* a map's last entry stays its state's last (pairs.py merges with it) */
    }
    PyMem_Free(plan);
    PyMem_Free(maps);
    Py_XDECREF(group);
    PyBuffer_Release(&buf);
    if (runs == NULL) return NULL;
    return runs_or_none(runs, r);
}

/* ------------------------------------------------------------------------------------------
 * The heap layout (keyed.py _decode_heap, _heap_key_group, _read_block)
 */

/* A heap state value (the state serializer's bytes: types/codecs.py _list_codec,
 * _map_codec, or the value's codec). */
static int heap_value(Cursor *c, const Plan *plan, PyObject **out) {
    if (plan->kind == K_VALUE) return read_value(c, plan->value, out);
    if (c->end - c->pos < 4) return GIVE_UP;
    int32_t n = (int32_t)be32(c->data + c->pos);
    c->pos += 4;
    if (n < 0 || n > c->end - c->pos) return GIVE_UP;
    if (plan->kind == K_LIST) {
        PyObject *list = PyList_New(n);
        if (list == NULL) return ERROR;
        for (int32_t i = 0; i < n; i++) {
            PyObject *element;
            int r = read_value(c, plan->value, &element);
            if (r != TAKEN) {
                Py_DECREF(list);  /* the NULL items left are skipped */
                return r;
            }
            PyList_SET_ITEM(list, i, element);
        }
        *out = list;
        return TAKEN;
    }
    PyObject *map = PyDict_New();
    if (map == NULL) return ERROR;
    for (int32_t i = 0; i < n; i++) {
        PyObject *key, *value;
        int r = read_value(c, plan->user_key, &key);
        if (r != TAKEN) {
            Py_DECREF(map);
            return r;
        }
        if (c->pos >= c->end) {
            Py_DECREF(key);
            Py_DECREF(map);
            return GIVE_UP;
        }
        unsigned char null = c->data[c->pos++];
        if (null) {
            value = Py_None;
            Py_INCREF(value);
        } else if ((r = read_value(c, plan->value, &value)) != TAKEN) {
            Py_DECREF(key);
            Py_DECREF(map);
            return r;
        }
        int failed = PyDict_SetItem(map, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (failed) {
            Py_DECREF(map);
            return ERROR;
        }
    }
    *out = map;
    return TAKEN;
}

/* heap_group(data, pos, limit, key_group, plans, outs, void) -> blocks | None
 *
 * The state blocks of one key group (after its int key group) from ``pos`` to ``limit``:
 * one per state, ``short id, int n``, then ``n`` x (namespace, key, value) or timers. Each
 * state's entries appended to ``outs[state id]``. Returns ``(state id, start, end)`` per
 * block with entries, or None: not taken.
 */
static PyObject *heap_group(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, limit, n_states;
    int key_group;
    PyObject *plans, *outs, *ns;
    if (!PyArg_ParseTuple(args, "y*nniO!O!O", &buf, &pos, &limit, &key_group,
                          &PyTuple_Type, &plans, &PyList_Type, &outs, &ns))
        return NULL;
    n_states = PyTuple_GET_SIZE(plans);
    if (n_states > MAX_STATES || n_states > 63 || PyList_GET_SIZE(outs) != n_states
            || limit > buf.len || pos < 0) {
        PyBuffer_Release(&buf);
        Py_RETURN_NONE;
    }
    Plan *plan = PyMem_Calloc((size_t)(n_states ? n_states : 1), sizeof(Plan));
    PyObject *runs = PyList_New(0);
    PyObject *group = PyLong_FromLong(key_group);
    int r = TAKEN;
    if (plan == NULL || runs == NULL || group == NULL) {
        if (plan == NULL) PyErr_NoMemory();
        r = ERROR;
    } else if (parse_plans(plans, plan, n_states)) {
        r = ERROR;
    }
    const unsigned char *data = buf.buf;
    uint64_t seen = 0;
    for (Py_ssize_t b = 0; r == TAKEN && b < n_states; b++) {
        Py_ssize_t block_start = pos;
        if (pos + 6 > limit) { r = GIVE_UP; break; }
        int state = (int16_t)(((uint16_t)data[pos] << 8) | data[pos + 1]);
        int32_t n = (int32_t)be32(data + pos + 2);
        pos += 6;
        if (state < 0 || state >= n_states || (seen >> state & 1)) { r = GIVE_UP; break; }
        seen |= (uint64_t)1 << state;
        if (n == 0) continue;
        if (n < 0 || n > limit - pos || !plan[state].ok) { r = GIVE_UP; break; }
        const Plan *p = &plan[state];
        PyObject *out = PyList_GET_ITEM(outs, state);
        Cursor c = {data, pos, limit};
        for (int32_t i = 0; i < n && r == TAKEN; i++) {
            PyObject *key, *value;
            if (p->kind == K_TIMERS) {
                if ((r = read_timer(&c, p, &value, &key)) != TAKEN) break;
            } else {
                if ((r = read_void(&c)) != TAKEN) break;  /* namespace, then key, value */
                if ((r = read_value(&c, p->key, &key)) != TAKEN) break;
                if ((r = heap_value(&c, p, &value)) != TAKEN) {
                    Py_DECREF(key);
                    break;
                }
            }
            r = append_entry(out, group, key, ns, value);
        }
        if (r != TAKEN) break;
        pos = c.pos;
        r = add_run(runs, state, block_start, pos);
    }
    if (r == TAKEN && pos != limit) r = GIVE_UP;  /* bytes after the blocks: Python's to judge */
    PyMem_Free(plan);
    Py_XDECREF(group);
    PyBuffer_Release(&buf);
    if (runs == NULL) return NULL;
    return runs_or_none(runs, r);
}

/* pairs_run(keys, values, prefix, key_group, plan, out, void) -> True | None
 *
 * One state's pairs of one key group from RocksDB (incremental.py _decode_batches): ``keys``
 * and ``values`` lists of bytes, each key after its ``prefix`` key-group bytes. Entries are
 * appended to ``out`` itself, a map's to the last entry already there when it is the same
 * key's (as pairs.py does). None: not taken -- the caller drops what was appended (the maps
 * extended got what the Python readers give them again).
 */
static PyObject *pairs_run(PyObject *self, PyObject *args) {
    PyObject *keys, *values, *plan_tuple, *out, *ns;
    int prefix, key_group;
    if (!PyArg_ParseTuple(args, "O!O!iiO!O!O", &PyList_Type, &keys, &PyList_Type, &values,
                          &prefix, &key_group, &PyTuple_Type, &plan_tuple, &PyList_Type, &out,
                          &ns))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    if (PyList_GET_SIZE(values) != n || prefix < 1 || prefix > 2) Py_RETURN_NONE;
    PyObject *one = PyTuple_Pack(1, plan_tuple);
    if (one == NULL) return NULL;
    Plan plan;
    int failed = parse_plans(one, &plan, 1);
    Py_DECREF(one);
    if (failed) return NULL;
    if (!plan.ok) Py_RETURN_NONE;
    PyObject *group = PyLong_FromLong(key_group);
    if (group == NULL) return NULL;
    MapRun run = {NULL, NULL, 0};
    if (plan.kind == K_MAP && PyList_GET_SIZE(out) > 0)
        run.last = PyList_GET_ITEM(out, PyList_GET_SIZE(out) - 1);  /* compared by value */
    int r = TAKEN;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n && r == TAKEN; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i), *value = PyList_GET_ITEM(values, i);
        if (!PyBytes_CheckExact(key) || !PyBytes_CheckExact(value)
                || PyBytes_GET_SIZE(key) < prefix) {
            r = GIVE_UP;
            break;
        }
        total += PyBytes_GET_SIZE(key) + PyBytes_GET_SIZE(value);
        Cursor k = {(const unsigned char *)PyBytes_AS_STRING(key), prefix, PyBytes_GET_SIZE(key)};
        Cursor v = {(const unsigned char *)PyBytes_AS_STRING(value), 0, PyBytes_GET_SIZE(value)};
        r = canonical_pair(&plan, &k, &v, group, ns, out, &run);
    }
    Py_DECREF(group);
    if (r == ERROR) return NULL;
    if (r == GIVE_UP) Py_RETURN_NONE;
    return PyLong_FromSsize_t(total);
}

static PyMethodDef methods[] = {
    {"index_run", rocksdb_index_run, METH_VARARGS,
     "The entries of a RocksDB index block from a restart point, or None (not taken)."},
    {"key_order", rocksdb_key_order, METH_O,
     "2: the bytes keys increase strictly, 1: never decrease, 0: they decrease; None."},
    {"trailer_span", rocksdb_trailer_span, METH_O,
     "(min, max) of a list of RocksDB trailers, or None."},
    {"onto_oldest", rocksdb_onto_oldest, METH_VARARGS,
     "Newer runs' versions onto the oldest run's values in place: True, False, or None."},
    {"data_run", rocksdb_data_run, METH_VARARGS,
     "A run of one table's RocksDB data blocks read and decoded, or None (not taken)."},
    {"simple_entries", rocksdb_simple_entries, METH_VARARGS,
     "The entries of one RocksDB data block as decode_data_blocks's loop reads them."},
    {"pairs_run", pairs_run, METH_VARARGS,
     "One state's RocksDB pairs of one key group: their bytes, or None (not taken)."},
    {"canonical_group", canonical_group, METH_VARARGS,
     "The pairs of one key group of a canonical keyed stream, or None (not taken)."},
    {"heap_group", heap_group, METH_VARARGS,
     "The state blocks of one key group of a heap keyed stream, or None (not taken)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "cdecoder",
    "Flink keyed state key groups of primitive states, decoded in C (see speedups.py).",
    -1, methods,
};

PyMODINIT_FUNC PyInit_cdecoder(void) {
    return PyModule_Create(&module);
}

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
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

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

/* GIVE_UP: not taken here (the Python readers decode the key group); ERROR: a Python error
 * is set (memory) */
#define TAKEN 0
#define GIVE_UP 1
#define ERROR (-1)

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

/* ------------------------------------------------------------------------------------------
 * RocksDB data blocks (rocksdb/block.py decode_data_blocks)
 */

/* simple_entries(buf, pos, limit, keys, values, heads) -> pos | None
 *
 * The loop of decode_data_blocks over one block of ``buf`` (``pos`` to ``limit``), as its
 * Python loop does it, checking nothing but the end: each entry's header is three one-byte
 * varints (shared, non-shared, value length); the user key is the previous one's first
 * ``shared`` bytes and the key delta without its 8-byte trailer; slices are Python's
 * (clamped). Appends to the three lists and returns where the loop ended (the caller checks
 * that and the rest, vectorised). None where a header would pass the buffer's end (the
 * Python loop raises there).
 */
static PyObject *simple_entries(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, limit;
    PyObject *keys, *values, *heads;
    if (!PyArg_ParseTuple(args, "y*nnO!O!O!", &buf, &pos, &limit, &PyList_Type, &keys,
                          &PyList_Type, &values, &PyList_Type, &heads))
        return NULL;
    const unsigned char *data = buf.buf;
    Py_ssize_t size = buf.len;
    unsigned char key[1024];  /* shared <= 255 and a delta slice <= 255 bytes */
    Py_ssize_t key_len = 0;
    int error = 0, give_up = 0;
    while (pos < limit) {
        if (pos < 0 || pos + 3 > size) { give_up = 1; break; }
        Py_ssize_t shared = data[pos], non_shared = data[pos + 1], value_length = data[pos + 2];
        Py_ssize_t end = pos + 3 + non_shared;
        if (shared < key_len) key_len = shared;  /* key[:shared] */
        Py_ssize_t from = pos + 3, to = end - 8;  /* buf[pos + 3:end - 8], clamped */
        if (to > size) to = size;
        if (to > from) {
            memcpy(key + key_len, data + from, (size_t)(to - from));
            key_len += to - from;
        }
        PyObject *head = PyLong_FromSsize_t(pos);
        pos = end + value_length;
        Py_ssize_t v_from = end < size ? end : size, v_to = pos < size ? pos : size;
        PyObject *k = PyBytes_FromStringAndSize((const char *)key, key_len);
        PyObject *v = PyBytes_FromStringAndSize((const char *)data + v_from,
                                                v_to > v_from ? v_to - v_from : 0);
        if (head == NULL || k == NULL || v == NULL || PyList_Append(heads, head)
                || PyList_Append(keys, k) || PyList_Append(values, v))
            error = 1;
        Py_XDECREF(head);
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (error) break;
    }
    PyBuffer_Release(&buf);
    if (error) return NULL;
    if (give_up) Py_RETURN_NONE;
    return PyLong_FromSsize_t(pos);
}

/* ------------------------------------------------------------------------------------------
 * RocksDB data blocks read whole: checksum, Snappy, entries (rocksdb/sst.py typed_data_blocks)
 */

#define MAX_BLOCK_SIZE (64 << 20)  /* compression.py MAX_BLOCK_SIZE */
#define XXH3_LAST_BYTE_PRIME 0x6B9083D9u
#define CRC32C_MASK_DELTA 0xA282EAD8u

static inline uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t le64(const unsigned char *p) {
    return (uint64_t)le32(p) | ((uint64_t)le32(p + 4) << 32);
}

/* bytes a vs b as Python compares them: <0, 0, >0 */
static inline int bytes_cmp(PyObject *a, PyObject *b) {
    Py_ssize_t la = PyBytes_GET_SIZE(a), lb = PyBytes_GET_SIZE(b);
    int c = memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), (size_t)(la < lb ? la : lb));
    return c ? c : (la < lb ? -1 : la > lb);
}

static int all_bytes(PyObject *list) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyBytes_CheckExact(PyList_GET_ITEM(list, i))) return 0;
    return 1;
}

/* A varint of at most max_shift / 7 + 1 bytes at b[*pos:limit] (coding.py get_varint32 /
 * get_varint64); GIVE_UP where those raise. */
static inline int varint(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t limit, int max_shift,
                         uint64_t bound, uint64_t *out) {
    uint64_t result = 0;
    for (int shift = 0; shift <= max_shift; shift += 7) {
        if (*pos >= limit) return GIVE_UP;
        unsigned char byte = b[(*pos)++];
        if (shift == 63 && (byte & 0x7F) > 1) return GIVE_UP;  /* over 64 bits */
        result |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 128) {
            if (result > bound) return GIVE_UP;
            *out = result;
            return TAKEN;
        }
    }
    return GIVE_UP;
}

/* Raw Snappy (format_description.txt of google/snappy): a varint32 length, then literals and
 * copies. 0 and the decompressed bytes in *out (grown as needed), or GIVE_UP for anything the
 * reference decoder would not turn into exactly the declared length. */
static int snappy(const unsigned char *src, Py_ssize_t n, unsigned char **out, size_t *room,
                  Py_ssize_t *out_len) {
    Py_ssize_t ip = 0, op = 0;
    uint64_t ulen = 0;
    for (int shift = 0;; shift += 7) {
        if (ip >= n || shift > 28) return GIVE_UP;
        unsigned char b = src[ip++];
        ulen |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) break;
    }
    if (ulen > MAX_BLOCK_SIZE || ulen > UINT32_MAX) return GIVE_UP;
    if (*room < ulen + 1) {
        unsigned char *grown = PyMem_Realloc(*out, (size_t)ulen + 1);
        if (grown == NULL) { PyErr_NoMemory(); return ERROR; }
        *out = grown;
        *room = (size_t)ulen + 1;
    }
    unsigned char *dst = *out;
    Py_ssize_t total = (Py_ssize_t)ulen;
    while (ip < n) {
        unsigned char tag = src[ip++];
        Py_ssize_t len, offset;
        if ((tag & 3) == 0) {  /* literal */
            len = tag >> 2;
            if (len >= 60) {
                int bytes = (int)len - 59;
                if (ip + bytes > n) return GIVE_UP;
                len = 0;
                for (int i = 0; i < bytes; i++) len |= (Py_ssize_t)src[ip + i] << (8 * i);
                ip += bytes;
            }
            len += 1;
            if (len > n - ip || len > total - op) return GIVE_UP;
            memcpy(dst + op, src + ip, (size_t)len);
            ip += len;
            op += len;
            continue;
        }
        if ((tag & 3) == 1) {
            if (ip + 1 > n) return GIVE_UP;
            len = ((tag >> 2) & 7) + 4;
            offset = ((Py_ssize_t)(tag >> 5) << 8) | src[ip];
            ip += 1;
        } else if ((tag & 3) == 2) {
            if (ip + 2 > n) return GIVE_UP;
            len = (tag >> 2) + 1;
            offset = (Py_ssize_t)src[ip] | ((Py_ssize_t)src[ip + 1] << 8);
            ip += 2;
        } else {
            if (ip + 4 > n) return GIVE_UP;
            len = (tag >> 2) + 1;
            offset = (Py_ssize_t)le32(src + ip);
            ip += 4;
        }
        if (offset == 0 || offset > op || len > total - op) return GIVE_UP;
        if (offset >= len) {
            memcpy(dst + op, dst + op - offset, (size_t)len);
        } else {  /* the copy overlaps what it writes: byte by byte, as the format means */
            for (Py_ssize_t i = 0; i < len; i++) dst[op + i] = dst[op - offset + i];
        }
        op += len;
    }
    if (op != total) return GIVE_UP;
    *out_len = total;
    return TAKEN;
}

/* The checksum of the block at data[offset:end] and its compression byte, as RocksDB stores
 * it (checksums.py compute_builtin_checksum; digest: the kind's Python function). */
static int block_checksum(const unsigned char *data, Py_ssize_t offset, Py_ssize_t end,
                          int kind, PyObject *digest, uint32_t *out) {
    Py_ssize_t n = kind == 4 ? end - offset : end + 1 - offset;
    PyObject *body = kind == 1
        ? PyBytes_FromStringAndSize((const char *)data + offset, n)  /* google_crc32c: bytes */
        : PyMemoryView_FromMemory((char *)data + offset, n, PyBUF_READ);
    if (body == NULL) return ERROR;
    PyObject *value = PyObject_CallOneArg(digest, body);
    Py_DECREF(body);
    if (value == NULL) return ERROR;
    unsigned long long full = PyLong_AsUnsignedLongLongMask(value);
    Py_DECREF(value);
    if (full == (unsigned long long)-1 && PyErr_Occurred()) return ERROR;
    uint32_t c = (uint32_t)full;
    if (kind == 1) {  /* crc32c::Mask */
        c = ((c >> 15) | (c << 17)) + CRC32C_MASK_DELTA;
    } else if (kind == 4) {
        c ^= (uint32_t)data[end] * XXH3_LAST_BYTE_PRIME;
    }
    *out = c;
    return TAKEN;
}

/* The entries of one decompressed data block (block.py decode_data_block: each entry three
 * varint32s, then the key delta and the value; the internal key is the previous one's first
 * ``shared`` bytes and the delta, its last 8 bytes the trailer), appended; the trailers to
 * *trailers. GIVE_UP for a block that is not well formed or has a hash index (the Python
 * reader says what it is). */
static int block_entries(const unsigned char *b, Py_ssize_t size, PyObject *keys,
                         PyObject *values, uint64_t **trailers, Py_ssize_t *count,
                         Py_ssize_t *cap, uint64_t global_seqno, unsigned char **key,
                         Py_ssize_t *key_room) {
    if (size < 4) return GIVE_UP;
    uint32_t packed = le32(b + size - 4);
    if (packed & 0xD0000000u) return GIVE_UP;  /* hash index, reserved, separated sections */
    Py_ssize_t num_restarts = packed & ((1u << 28) - 1);
    Py_ssize_t end = size - 4;
    if (num_restarts * 4 > end) return GIVE_UP;
    Py_ssize_t limit = end - 4 * num_restarts;
    if (num_restarts == 0 && limit != 0) return GIVE_UP;
    Py_ssize_t pos = 0, key_len = 0;
    while (pos < limit) {
        uint64_t shared, non_shared, value_length;
        if (pos + 3 <= limit && (b[pos] | b[pos + 1] | b[pos + 2]) < 128) {
            shared = b[pos];
            non_shared = b[pos + 1];
            value_length = b[pos + 2];
            pos += 3;
        } else if (varint(b, &pos, limit, 28, 0xFFFFFFFFu, &shared)
                   || varint(b, &pos, limit, 28, 0xFFFFFFFFu, &non_shared)
                   || varint(b, &pos, limit, 28, 0xFFFFFFFFu, &value_length)) {
            return GIVE_UP;
        }
        if ((Py_ssize_t)shared > key_len || non_shared > (uint64_t)(limit - pos)
                || value_length > (uint64_t)(limit - pos - (Py_ssize_t)non_shared))
            return GIVE_UP;
        Py_ssize_t kend = pos + (Py_ssize_t)non_shared, vend = kend + (Py_ssize_t)value_length;
        Py_ssize_t full = (Py_ssize_t)shared + (Py_ssize_t)non_shared;
        if (full < 8) return GIVE_UP;  /* an internal key shorter than its trailer */
        if (full > *key_room) {
            Py_ssize_t room = full * 2 + 256;
            unsigned char *grown = PyMem_Realloc(*key, (size_t)room);
            if (grown == NULL) { PyErr_NoMemory(); return ERROR; }
            *key = grown;
            *key_room = room;
        }
        memcpy(*key + shared, b + pos, (size_t)non_shared);
        key_len = full;
        uint64_t trailer = le64(*key + full - 8);
        if (global_seqno) trailer = (global_seqno << 8) | (trailer & 0xFF);
        if (*count == *cap) {
            Py_ssize_t grown = *cap ? *cap * 2 : 1024;
            uint64_t *more = PyMem_Realloc(*trailers, (size_t)grown * sizeof(uint64_t));
            if (more == NULL) { PyErr_NoMemory(); return ERROR; }
            *trailers = more;
            *cap = grown;
        }
        (*trailers)[(*count)++] = trailer;
        PyObject *k = PyBytes_FromStringAndSize((const char *)*key, full - 8);
        PyObject *v = PyBytes_FromStringAndSize((const char *)b + kend, (Py_ssize_t)value_length);
        int failed = k == NULL || v == NULL || PyList_Append(keys, k) || PyList_Append(values, v);
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (failed) return ERROR;
        pos = vend;
    }
    return TAKEN;
}

/* data_run(data, offsets, sizes, footer_offset, checksum_kind, digest, base_context,
 *          global_seqno, separators, previous) -> (keys, trailers, values, starts, types,
 *                                                   order) | None
 *
 * The data blocks at (offsets[i], sizes[i]) of one table's bytes, read as SstFile.read_block
 * reads them (in the table, before its footer; checksum verified, format version 6's context
 * removed; uncompressed or Snappy) and decoded as decode_data_block decodes each: their
 * entries concatenated, where each block's first entry is, the set of value types. None for
 * anything else -- a checksum that does not match, another compression, a block with a hash
 * index, anything not well formed -- and the Python reader reads the run, raising what it
 * deserves. checksum_kind 0 (none) needs no digest. As SstFile.typed_data_blocks checks
 * them, each block's keys must be above ``previous`` (the last key of the block before) and at
 * most its index separator (else None); ``order``: 2 the run's keys increase strictly, 1
 * they never decrease, 0 they decrease somewhere (merge.py _key_order).
 */
static PyObject *data_run(PyObject *self, PyObject *args) {
    Py_buffer buf;
    PyObject *offsets, *sizes, *digest, *separators, *previous;
    Py_ssize_t footer_offset;
    int kind;
    unsigned long long base_context, global_seqno;
    if (!PyArg_ParseTuple(args, "y*O!O!niOKKO!S", &buf, &PyList_Type, &offsets, &PyList_Type,
                          &sizes, &footer_offset, &kind, &digest, &base_context, &global_seqno,
                          &PyList_Type, &separators, &previous))
        return NULL;
    const unsigned char *data = buf.buf;
    Py_ssize_t n = PyList_GET_SIZE(offsets);
    PyObject *keys = PyList_New(0), *values = PyList_New(0), *starts = PyList_New(0);
    PyObject *result = NULL;
    uint64_t *trailers = NULL;
    Py_ssize_t count = 0, cap = 0;
    unsigned char *scratch = NULL;
    size_t room = 0;
    unsigned char *key = NULL;  /* the internal key being built */
    Py_ssize_t key_room = 0;
    int r = TAKEN;
    if (keys == NULL || values == NULL || starts == NULL) r = ERROR;
    if (PyList_GET_SIZE(sizes) != n || PyList_GET_SIZE(separators) != n || kind < 0
            || kind > 4 || footer_offset > buf.len || !all_bytes(separators))
        r = GIVE_UP;
    PyObject *last = previous;  /* the last key of the block before (borrowed) */
    for (Py_ssize_t i = 0; i < n && r == TAKEN; i++) {
        Py_ssize_t offset = PyLong_AsSsize_t(PyList_GET_ITEM(offsets, i));
        Py_ssize_t size = PyLong_AsSsize_t(PyList_GET_ITEM(sizes, i));
        if ((offset == -1 || size == -1) && PyErr_Occurred()) { r = ERROR; break; }
        if (offset < 0 || size < 0 || offset + size + 5 > footer_offset) { r = GIVE_UP; break; }
        Py_ssize_t end = offset + size;
        if (kind != 0) {
            uint32_t computed;
            r = block_checksum(data, offset, end, kind, digest, &computed);
            if (r != TAKEN) break;
            uint32_t modifier = 0;
            if (base_context) {
                uint64_t o = (uint64_t)offset;
                modifier = (uint32_t)base_context ^ (uint32_t)((o & 0xFFFFFFFFu) + (o >> 32));
            }
            if ((uint32_t)(le32(data + end + 1) - modifier) != computed) { r = GIVE_UP; break; }
        }
        const unsigned char *block = data + offset;
        Py_ssize_t block_size = size;
        if (data[end] == 1) {
            r = snappy(data + offset, size, &scratch, &room, &block_size);
            if (r != TAKEN) break;
            block = scratch;
        } else if (data[end] != 0) {
            r = GIVE_UP;
            break;
        }
        PyObject *start = PyLong_FromSsize_t(PyList_GET_SIZE(keys));
        if (start == NULL || PyList_Append(starts, start)) r = ERROR;
        Py_XDECREF(start);
        Py_ssize_t first = PyList_GET_SIZE(keys);
        if (r == TAKEN)
            r = block_entries(block, block_size, keys, values, &trailers, &count, &cap,
                              global_seqno, &key, &key_room);
        if (r == TAKEN && PyList_GET_SIZE(keys) > first) {
            if (bytes_cmp(PyList_GET_ITEM(keys, first), last) < 0
                    || bytes_cmp(PyList_GET_ITEM(keys, PyList_GET_SIZE(keys) - 1),
                                 PyList_GET_ITEM(separators, i)) > 0) {
                r = GIVE_UP;  /* out of order with the block before, or above its separator */
                break;
            }
            last = PyList_GET_ITEM(keys, PyList_GET_SIZE(keys) - 1);
        }
    }
    int order = 2;
    for (Py_ssize_t i = 1; r == TAKEN && i < count; i++) {
        int c = bytes_cmp(PyList_GET_ITEM(keys, i - 1), PyList_GET_ITEM(keys, i));
        if (c > 0) { order = 0; break; }
        if (c == 0) order = 1;
    }
    if (r == TAKEN) {
        PyObject *listed = PyList_New(count), *types = PySet_New(NULL);
        if (listed == NULL || types == NULL) r = ERROR;
        int same = 1;
        for (Py_ssize_t i = 1; i < count && same; i++) same = trailers[i] == trailers[0];
        PyObject *first = NULL;
        for (Py_ssize_t i = 0; i < count && r == TAKEN; i++) {
            PyObject *t;
            if (same && first != NULL) {
                t = first;
                Py_INCREF(t);
            } else {
                t = PyLong_FromUnsignedLongLong(trailers[i]);
                if (t == NULL) { r = ERROR; break; }
                if (first == NULL) first = t;
            }
            PyList_SET_ITEM(listed, i, t);
        }
        unsigned char seen[256] = {0};
        for (Py_ssize_t i = 0; i < count && r == TAKEN; i++) {
            unsigned char type = (unsigned char)(trailers[i] & 0xFF);
            if (seen[type]) continue;
            seen[type] = 1;
            PyObject *t = PyLong_FromLong(type);
            if (t == NULL || PySet_Add(types, t)) r = ERROR;
            Py_XDECREF(t);
            if (same) break;
        }
        if (r == TAKEN) {
            PyObject *frozen = PyFrozenSet_New(types);
            PyObject *ordered = PyLong_FromLong(order);
            if (frozen != NULL && ordered != NULL)
                result = PyTuple_Pack(6, keys, listed, values, starts, frozen, ordered);
            Py_XDECREF(frozen);
            Py_XDECREF(ordered);
        }
        Py_XDECREF(listed);
        Py_XDECREF(types);
    }
    PyMem_Free(trailers);
    PyMem_Free(scratch);
    PyMem_Free(key);
    PyBuffer_Release(&buf);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(starts);
    if (r == ERROR) return NULL;
    if (r == GIVE_UP) Py_RETURN_NONE;
    return result;
}

/* ------------------------------------------------------------------------------------------
 * RocksDB merging (rocksdb/merge.py)
 */


/* key_order(keys) -> 2 (strictly increasing), 1 (never decreasing), 0 (decreasing somewhere),
 * None (an item is not bytes): merge.py _Cursor.fill's order checks in one pass. */
static PyObject *key_order(PyObject *self, PyObject *keys) {
    if (!PyList_Check(keys) || !all_bytes(keys)) Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    int order = 2;
    for (Py_ssize_t i = 1; i < n; i++) {
        int c = bytes_cmp(PyList_GET_ITEM(keys, i - 1), PyList_GET_ITEM(keys, i));
        if (c > 0) { order = 0; break; }
        if (c == 0) order = 1;
    }
    return PyLong_FromLong(order);
}

/* trailer_span(trailers) -> (min, max) of a non-empty list of ints below 2**64, or None. */
static PyObject *trailer_span(PyObject *self, PyObject *trailers) {
    if (!PyList_Check(trailers) || PyList_GET_SIZE(trailers) == 0) Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(trailers);
    PyObject *low = PyList_GET_ITEM(trailers, 0), *high = low, *seen = NULL;
    unsigned long long lo = 0, hi = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(trailers, i);
        if (item == seen) continue;  /* a bottommost table's one trailer, repeated */
        if (!PyLong_CheckExact(item)) Py_RETURN_NONE;
        unsigned long long t = PyLong_AsUnsignedLongLong(item);
        if (t == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        if (seen == NULL || t < lo) { lo = t; low = item; }
        if (seen == NULL || t > hi) { hi = t; high = item; }
        seen = item;
    }
    return PyTuple_Pack(2, low, high);
}

/* onto_oldest(base_keys, base_values, newer, merge_type, delimiter, values_kind) -> bool | None
 *
 * merge.py _onto_oldest: ``newer`` is a list of (keys, trailers, values, kind) runs (kind
 * ``values_kind``: only values),
 * oldest first, whose every key must be among ``base_keys`` (sorted, bytes); then each newer
 * version replaces the value below it, or, a merge operand (trailer & 0xFF == merge_type), is
 * appended to it after ``delimiter``; base_values is updated in place. False, with nothing
 * changed, where a newer key is not among base_keys; None where an item is not bytes.
 */
static PyObject *onto_oldest(PyObject *self, PyObject *args) {
    PyObject *base_keys, *base_values, *newer, *delimiter;
    int merge_type;
    long values_kind;
    if (!PyArg_ParseTuple(args, "O!O!O!iO!l", &PyList_Type, &base_keys, &PyList_Type,
                          &base_values, &PyList_Type, &newer, &merge_type, &PyBytes_Type,
                          &delimiter, &values_kind))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(base_keys), runs = PyList_GET_SIZE(newer), total = 0;
    if (PyList_GET_SIZE(base_values) != n || !all_bytes(base_keys) || !all_bytes(base_values))
        Py_RETURN_NONE;
    for (Py_ssize_t r = 0; r < runs; r++) {
        PyObject *run = PyList_GET_ITEM(newer, r);
        if (!PyTuple_Check(run) || PyTuple_GET_SIZE(run) != 4) Py_RETURN_NONE;
        PyObject *keys = PyTuple_GET_ITEM(run, 0), *trailers = PyTuple_GET_ITEM(run, 1),
                 *values = PyTuple_GET_ITEM(run, 2);
        if (!PyList_Check(keys) || !PyList_Check(trailers) || !PyList_Check(values)
                || PyList_GET_SIZE(trailers) != PyList_GET_SIZE(keys)
                || PyList_GET_SIZE(values) != PyList_GET_SIZE(keys)
                || !all_bytes(keys) || !all_bytes(values))
            Py_RETURN_NONE;
        total += PyList_GET_SIZE(keys);
    }
    Py_ssize_t *at = PyMem_Malloc((size_t)(total ? total : 1) * sizeof(Py_ssize_t));
    if (at == NULL) return PyErr_NoMemory();
    Py_ssize_t k = 0;
    for (Py_ssize_t r = 0; r < runs; r++) {
        PyObject *keys = PyTuple_GET_ITEM(PyList_GET_ITEM(newer, r), 0);
        Py_ssize_t m = PyList_GET_SIZE(keys), from = 0;
        for (Py_ssize_t i = 0; i < m; i++, k++) {
            PyObject *key = PyList_GET_ITEM(keys, i);
            Py_ssize_t lo = from, hi = n;  /* bisect_left, from the previous key's place on */
            if (i > 0 && bytes_cmp(key, PyList_GET_ITEM(keys, i - 1)) < 0) lo = 0;
            while (lo < hi) {
                Py_ssize_t mid = lo + (hi - lo) / 2;
                if (bytes_cmp(PyList_GET_ITEM(base_keys, mid), key) < 0) lo = mid + 1;
                else hi = mid;
            }
            if (lo >= n || bytes_cmp(PyList_GET_ITEM(base_keys, lo), key) != 0) {
                PyMem_Free(at);
                Py_RETURN_FALSE;
            }
            at[k] = from = lo;
        }
    }
    k = 0;
    const char *sep = PyBytes_AS_STRING(delimiter);
    Py_ssize_t sep_len = PyBytes_GET_SIZE(delimiter);
    for (Py_ssize_t r = 0; r < runs; r++) {
        PyObject *run = PyList_GET_ITEM(newer, r);
        PyObject *trailers = PyTuple_GET_ITEM(run, 1), *values = PyTuple_GET_ITEM(run, 2);
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(run, 3));
        if (kind == -1 && PyErr_Occurred()) { PyMem_Free(at); return NULL; }
        int only_values = kind == values_kind;
        Py_ssize_t m = PyList_GET_SIZE(values);
        for (Py_ssize_t i = 0; i < m; i++, k++) {
            PyObject *value = PyList_GET_ITEM(values, i), *put;
            int merge = 0;
            if (!only_values) {
                PyObject *trailer = PyList_GET_ITEM(trailers, i);
                unsigned long long t = PyLong_AsUnsignedLongLongMask(trailer);
                if (t == (unsigned long long)-1 && PyErr_Occurred()) { PyMem_Free(at); return NULL; }
                merge = (int)(t & 0xFF) == merge_type;
            }
            if (merge) {
                PyObject *below = PyList_GET_ITEM(base_values, at[k]);
                Py_ssize_t lb = PyBytes_GET_SIZE(below), lv = PyBytes_GET_SIZE(value);
                put = PyBytes_FromStringAndSize(NULL, lb + sep_len + lv);
                if (put == NULL) { PyMem_Free(at); return NULL; }
                char *to = PyBytes_AS_STRING(put);
                memcpy(to, PyBytes_AS_STRING(below), (size_t)lb);
                memcpy(to + lb, sep, (size_t)sep_len);
                memcpy(to + lb + sep_len, PyBytes_AS_STRING(value), (size_t)lv);
            } else {
                put = value;
                Py_INCREF(put);
            }
            PyList_SetItem(base_values, at[k], put);  /* steals put, drops the old value */
        }
    }
    PyMem_Free(at);
    Py_RETURN_TRUE;
}

/* index_run(block, pos, limit, delta, with_seq, first_key, target, end)
 *     -> (separators, offsets, sizes) | None
 *
 * block.py IndexBlock._entries_from from ``pos`` (a restart point): the entries whose
 * separator's user key is >= target, up to and including the first whose is >= end (None: to
 * the block's end), as three lists; checked as that generator checks them (every entry from
 * pos on, in key and offset order). None for anything it would raise on (it then does).
 */
static PyObject *index_run(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, limit;
    int delta, with_seq, first_key;
    PyObject *target, *end_key;
    if (!PyArg_ParseTuple(args, "y*nnpppSO", &buf, &pos, &limit, &delta, &with_seq, &first_key,
                          &target, &end_key))
        return NULL;
    const unsigned char *b = buf.buf;
    PyObject *seps = PyList_New(0), *offsets = PyList_New(0), *sizes = PyList_New(0);
    PyObject *result = NULL;
    unsigned char *key = NULL;
    Py_ssize_t key_len = 0, key_room = 0;
    int r = TAKEN, have_previous = 0;
    uint64_t prev_offset = 0, prev_size = 0;
    PyObject *prev_user = NULL;
    if (seps == NULL || offsets == NULL || sizes == NULL) r = ERROR;
    if (end_key != Py_None && !PyBytes_Check(end_key)) r = GIVE_UP;
    if (pos < 0 || limit > buf.len || pos > limit) r = GIVE_UP;
    while (r == TAKEN && pos < limit) {
        uint64_t shared, non_shared, value_length = 0;
        if (varint(b, &pos, limit, 28, 0xFFFFFFFFu, &shared)
                || varint(b, &pos, limit, 28, 0xFFFFFFFFu, &non_shared)
                || (!delta && varint(b, &pos, limit, 28, 0xFFFFFFFFu, &value_length))) {
            r = GIVE_UP;
            break;
        }
        Py_ssize_t kend = pos + (Py_ssize_t)non_shared;
        if ((Py_ssize_t)shared > key_len || non_shared > (uint64_t)limit || kend > limit) {
            r = GIVE_UP;
            break;
        }
        if ((Py_ssize_t)(shared + non_shared) > key_room) {
            Py_ssize_t room = (Py_ssize_t)(shared + non_shared) * 2 + 64;
            unsigned char *grown = PyMem_Realloc(key, (size_t)room);
            if (grown == NULL) { PyErr_NoMemory(); r = ERROR; break; }
            key = grown;
            key_room = room;
        }
        memcpy(key + shared, b + pos, (size_t)non_shared);
        key_len = (Py_ssize_t)(shared + non_shared);
        Py_ssize_t value_end = delta ? limit : kend + (Py_ssize_t)value_length;
        if (!delta && (value_length > (uint64_t)limit || value_end > limit)) { r = GIVE_UP; break; }
        uint64_t offset, size;
        Py_ssize_t at = kend;
        if (delta && shared && have_previous) {
            uint64_t zz;
            if (varint(b, &at, value_end, 63, UINT64_MAX, &zz)) { r = GIVE_UP; break; }
            int64_t d = (int64_t)(zz >> 1) ^ -(int64_t)(zz & 1);
            if (prev_size > INT64_MAX / 2 || prev_offset > INT64_MAX / 2) { r = GIVE_UP; break; }
            int64_t new_size = (int64_t)prev_size + d;
            if (new_size < 0) { r = GIVE_UP; break; }
            offset = prev_offset + prev_size + 5;
            size = (uint64_t)new_size;
        } else if (delta && shared) {
            r = GIVE_UP;
            break;
        } else {
            if (varint(b, &at, value_end, 63, UINT64_MAX, &offset)
                    || varint(b, &at, value_end, 63, UINT64_MAX, &size)) {
                r = GIVE_UP;
                break;
            }
        }
        if (first_key) {
            uint64_t length;
            if (varint(b, &at, value_end, 28, 0xFFFFFFFFu, &length)
                    || length > (uint64_t)(value_end - at)) {
                r = GIVE_UP;
                break;
            }
            at += (Py_ssize_t)length;
        }
        pos = delta ? at : value_end;
        Py_ssize_t user_len = key_len;
        if (with_seq) {
            if (key_len < 8) { r = GIVE_UP; break; }
            user_len -= 8;
        }
        if (offset > (uint64_t)PY_SSIZE_T_MAX || size > (uint64_t)PY_SSIZE_T_MAX) {
            r = GIVE_UP;
            break;
        }
        PyObject *user = PyBytes_FromStringAndSize((const char *)key, user_len);
        if (user == NULL) { r = ERROR; break; }
        if (have_previous && (bytes_cmp(user, prev_user) < 0 || offset <= prev_offset)) {
            Py_DECREF(user);
            r = GIVE_UP;
            break;
        }
        Py_XDECREF(prev_user);
        prev_user = user;
        have_previous = 1;
        prev_offset = offset;
        prev_size = size;
        if (bytes_cmp(user, target) >= 0) {
            PyObject *o = PyLong_FromUnsignedLongLong(offset);
            PyObject *z = PyLong_FromUnsignedLongLong(size);
            int failed = o == NULL || z == NULL || PyList_Append(seps, user)
                || PyList_Append(offsets, o) || PyList_Append(sizes, z);
            Py_XDECREF(o);
            Py_XDECREF(z);
            if (failed) { r = ERROR; break; }
            if (end_key != Py_None && bytes_cmp(user, end_key) >= 0) break;
        }
    }
    if (r == TAKEN) result = PyTuple_Pack(3, seps, offsets, sizes);
    Py_XDECREF(prev_user);
    PyMem_Free(key);
    PyBuffer_Release(&buf);
    Py_XDECREF(seps);
    Py_XDECREF(offsets);
    Py_XDECREF(sizes);
    if (r == ERROR) return NULL;
    if (r == GIVE_UP) Py_RETURN_NONE;
    return result;
}

static PyMethodDef methods[] = {
    {"index_run", index_run, METH_VARARGS,
     "The entries of a RocksDB index block from a restart point, or None (not taken)."},
    {"key_order", key_order, METH_O,
     "2: the bytes keys increase strictly, 1: never decrease, 0: they decrease; None."},
    {"trailer_span", trailer_span, METH_O,
     "(min, max) of a list of RocksDB trailers, or None."},
    {"onto_oldest", onto_oldest, METH_VARARGS,
     "Newer runs' versions onto the oldest run's values in place: True, False, or None."},
    {"data_run", data_run, METH_VARARGS,
     "A run of one table's RocksDB data blocks read and decoded, or None (not taken)."},
    {"simple_entries", simple_entries, METH_VARARGS,
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

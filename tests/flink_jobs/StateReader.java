import java.io.DataInputStream;
import java.io.File;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.base.ListSerializer;
import org.apache.flink.api.common.typeutils.base.MapSerializer;
import org.apache.flink.api.common.typeutils.base.array.BytePrimitiveArraySerializer;
import org.apache.flink.api.java.tuple.Tuple;
import org.apache.flink.core.fs.FSDataInputStream;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.CompositeKeySerializationUtils;
import org.apache.flink.runtime.state.IncrementalKeyedStateHandle;
import org.apache.flink.runtime.state.IncrementalRemoteKeyedStateHandle;
import org.apache.flink.runtime.state.KeyGroupsSavepointStateHandle;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.ListDelimitedSerializer;
import org.apache.flink.runtime.state.OperatorBackendSerializationProxy;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.SnappyStreamCompressionDecorator;
import org.apache.flink.runtime.state.StreamCompressionDecorator;
import org.apache.flink.runtime.state.UncompressedStreamCompressionDecorator;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;
import org.apache.flink.streaming.api.operators.TimerHeapInternalTimer;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.table.data.ArrayData;
import org.apache.flink.table.data.DecimalData;
import org.apache.flink.table.data.MapData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.runtime.typeutils.RowDataSerializer;
import org.apache.flink.table.types.logical.ArrayType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.MapType;
import org.apache.flink.table.types.logical.MultisetType;
import org.apache.flink.table.types.logical.RowType;
import org.rocksdb.ColumnFamilyDescriptor;
import org.rocksdb.ColumnFamilyHandle;
import org.rocksdb.ColumnFamilyOptions;
import org.rocksdb.DBOptions;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksIterator;

/**
 * An independent reader of any Flink snapshot's state, built on Flink's own classes (and RocksDB's
 * own library for RocksDB snapshots): the reference statectl's reading is compared with.
 *
 * <p>{@code java StateReader OUT NAME=PATH...} writes {@code OUT/NAME.jsonl}: one line per state
 * ({"op": OperatorID, "state", "scope": "keyed"|"operator", "kind", "entries"}), then one per entry
 * ({"op", "state", "key", "ns", "value"}). An entry is what statectl counts as one: a keyed state's
 * (key, namespace) with its whole value (a map state's map, a list state's list, a timer state's
 * timestamps), an operator state's element. Values are printed in statectl's canonical JSON forms
 * (docs/flink-types.md) where this reader knows the type, else as {"@class", "text"}.
 *
 * <p>How each snapshot kind is read: {@code Checkpoints.loadCheckpointMetadata}, then per keyed handle
 * its {@code KeyedBackendSerializationProxy} (the state meta infos and their serializer snapshots,
 * restored to serializers with {@code restoreSerializer()}) and its data: the heap format
 * ({@code HeapRestoreOperation}: per key group and state, a count, then namespace, key, value), the
 * canonical format ({@code FullSnapshotRestoreOperation}: key/value byte pairs, the state id switched
 * by the key's first bit) or a RocksDB instance (the handle's files, opened read-only by RocksDB's
 * Java binding; the same key/value layout as the canonical format). Operator state: the
 * {@code OperatorBackendSerializationProxy} and each element at its offset.
 */
public class StateReader {

    static final ClassLoader CL = StateReader.class.getClassLoader();

    /** (op, state) -> line of the state; (op, state) -> entry key -> entry. */
    static final Map<String, String[]> STATES = new TreeMap<>();
    static final Map<String, Map<String, Entry>> ENTRIES = new TreeMap<>();

    static final class Entry {
        String key;
        String ns;
        Object value; // a rendered string, or for maps/lists/timers the parts gathered
        List<String> parts;
        Map<String, String> map;
    }

    public static void main(String[] args) {
        try {
            File out = new File(args[0]);
            out.mkdirs();
            for (int i = 1; i < args.length; i++) {
                String[] kv = args[i].split("=", 2);
                STATES.clear();
                ENTRIES.clear();
                read(kv[1]);
                write(new File(out, kv[0] + ".jsonl"));
            }
        } catch (Throwable e) {
            e.printStackTrace();
            System.out.println("FAILED " + e);
            System.exit(1);
        }
        System.out.println("DONE");
        System.exit(0);
    }

    static void read(String path) throws Exception {
        File dir = new File(path);
        File meta = dir.isDirectory() ? new File(dir, "_metadata") : dir;
        CheckpointMetadata md;
        try (DataInputStream in = new DataInputStream(Files.newInputStream(meta.toPath()))) {
            md = Checkpoints.loadCheckpointMetadata(in, CL, meta.getParentFile().getAbsolutePath());
        }
        for (OperatorState op : md.getOperatorStates()) {
            String opId = op.getOperatorID().toHexString();
            int maxParallelism = op.getMaxParallelism();
            for (OperatorSubtaskState sub : op.getStates()) {
                for (KeyedStateHandle h : sub.getManagedKeyedState()) readKeyed(opId, maxParallelism, h);
                for (OperatorStateHandle h : sub.getManagedOperatorState()) readOperator(opId, h);
            }
        }
    }

    // ------------------------------------------------------------------ keyed state

    static final class Meta {
        final String name;
        final String kind;
        final TypeSerializer<Object> ns;
        final TypeSerializer<Object> value;

        @SuppressWarnings("unchecked")
        Meta(StateMetaInfoSnapshot s) {
            name = s.getName();
            if (s.getBackendStateType() == StateMetaInfoSnapshot.BackendStateType.PRIORITY_QUEUE) {
                kind = "TIMERS";
                ns = null;
            } else {
                kind = s.getOption(StateMetaInfoSnapshot.CommonOptionsKeys.KEYED_STATE_TYPE);
                ns = (TypeSerializer<Object>) restore(s.getTypeSerializerSnapshot(StateMetaInfoSnapshot.CommonSerializerKeys.NAMESPACE_SERIALIZER));
            }
            value = (TypeSerializer<Object>) restore(s.getTypeSerializerSnapshot(StateMetaInfoSnapshot.CommonSerializerKeys.VALUE_SERIALIZER));
        }
    }

    static TypeSerializer<?> restore(TypeSerializerSnapshot<?> s) {
        return s == null ? null : s.restoreSerializer();
    }

    static void declare(String op, String state, String scope, String kind) {
        STATES.putIfAbsent(op + "\u0000" + state, new String[] {op, state, scope, kind});
        ENTRIES.computeIfAbsent(op + "\u0000" + state, k -> new TreeMap<>());
    }

    /** The keyed states a handle's meta data names, in state id order, each declared. */
    static List<Meta> metas(String op, KeyedBackendSerializationProxy<Object> proxy) {
        List<Meta> metas = new ArrayList<>();
        for (StateMetaInfoSnapshot s : proxy.getStateMetaInfoSnapshots()) {
            Meta m = new Meta(s);
            metas.add(m);
            declare(op, m.name, "keyed", m.kind);
        }
        return metas;
    }

    @SuppressWarnings("unchecked")
    static void readKeyed(String op, int maxParallelism, KeyedStateHandle h) throws Exception {
        if (h instanceof IncrementalRemoteKeyedStateHandle) {
            readRocksDb(op, maxParallelism, (IncrementalRemoteKeyedStateHandle) h);
            return;
        }
        if (!(h instanceof KeyGroupsStateHandle)) throw new IllegalStateException("keyed handle " + h.getClass());
        KeyGroupsStateHandle kh = (KeyGroupsStateHandle) h;
        boolean canonical = kh instanceof KeyGroupsSavepointStateHandle;
        try (FSDataInputStream in = kh.openInputStream()) {
            DataInputViewStreamWrapper view = new DataInputViewStreamWrapper(in);
            KeyedBackendSerializationProxy<Object> proxy = new KeyedBackendSerializationProxy<>(CL);
            proxy.read(view);
            TypeSerializer<Object> keySer = (TypeSerializer<Object>) proxy.getKeySerializerSnapshot().restoreSerializer();
            List<Meta> metas = metas(op, proxy);
            StreamCompressionDecorator dec = proxy.isUsingKeyGroupCompression()
                    ? SnappyStreamCompressionDecorator.INSTANCE : UncompressedStreamCompressionDecorator.INSTANCE;
            for (org.apache.flink.api.java.tuple.Tuple2<Integer, Long> kg : kh.getGroupRangeOffsets()) {
                if (canonical && kg.f1 == 0L) continue;
                in.seek(kg.f1);
                if (!canonical) {
                    int written = view.readInt();
                    if (written != kg.f0) throw new IllegalStateException("key group " + written + " at the offset of " + kg.f0);
                }
                InputStream kgIn = dec.decorateWithCompression(in);
                DataInputViewStreamWrapper kv = new DataInputViewStreamWrapper(kgIn);
                if (canonical) readCanonicalKeyGroup(op, maxParallelism, kv, keySer, metas);
                else readHeapKeyGroup(op, kv, keySer, metas);
            }
        }
    }

    static void readHeapKeyGroup(String op, DataInputViewStreamWrapper in, TypeSerializer<Object> keySer, List<Meta> metas) throws Exception {
        for (int i = 0; i < metas.size(); i++) {
            Meta m = metas.get(in.readShort());
            int n = in.readInt();
            for (int j = 0; j < n; j++) {
                if (m.kind.equals("TIMERS")) {
                    timer(op, m, m.value.deserialize(in));
                    continue;
                }
                Object ns = m.ns.deserialize(in);
                Object key = keySer.deserialize(in);
                Object value = m.value.deserialize(in);
                Entry e = entry(op, m, keySer, key, ns);
                e.value = render(value, m.value);
            }
        }
    }

    static Entry entry(String op, Meta m, TypeSerializer<?> keySer, Object key, Object ns) {
        String k = render(key, keySer);
        String n = ns instanceof VoidNamespace || ns == null ? "null" : render(ns, m.ns);
        return ENTRIES.get(op + "\u0000" + m.name).computeIfAbsent(k + "\u0000" + n, x -> {
            Entry e = new Entry();
            e.key = k;
            e.ns = n;
            return e;
        });
    }

    @SuppressWarnings("unchecked")
    static void timer(String op, Meta m, Object element) {
        TimerHeapInternalTimer<Object, Object> t = (TimerHeapInternalTimer<Object, Object>) element;
        TypeSerializer<?> timerSer = m.value;
        TypeSerializer<?> keySer = null;
        TypeSerializer<?> nsSer = null;
        try {
            java.lang.reflect.Field kf = timerSer.getClass().getDeclaredField("keySerializer");
            java.lang.reflect.Field nf = timerSer.getClass().getDeclaredField("namespaceSerializer");
            kf.setAccessible(true);
            nf.setAccessible(true);
            keySer = (TypeSerializer<?>) kf.get(timerSer);
            nsSer = (TypeSerializer<?>) nf.get(timerSer);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
        String k = render(t.getKey(), keySer);
        String n = t.getNamespace() instanceof VoidNamespace ? "null" : render(t.getNamespace(), nsSer);
        Entry e = ENTRIES.get(op + "\u0000" + m.name).computeIfAbsent(k + "\u0000" + n, x -> {
            Entry en = new Entry();
            en.key = k;
            en.ns = n;
            en.parts = new ArrayList<>();
            return en;
        });
        e.parts.add(Long.toString(t.getTimestamp()));
    }

    @SuppressWarnings("unchecked")
    static void readCanonicalKeyGroup(String op, int maxParallelism, DataInputViewStreamWrapper in, TypeSerializer<Object> keySer, List<Meta> metas) throws Exception {
        int stateId = 0xFFFF & in.readShort();
        while (stateId != 0xFFFF) {
            byte[] key = BytePrimitiveArraySerializer.INSTANCE.deserialize(in);
            byte[] value = BytePrimitiveArraySerializer.INSTANCE.deserialize(in);
            Meta m = metas.get(stateId);
            boolean follows = (key[0] & 0x80) != 0;
            key[0] &= 0x7F;
            pair(op, maxParallelism, keySer, m, key, value);
            if (follows) stateId = 0xFFFF & in.readShort();
        }
    }

    /** One key/value pair of the canonical or RocksDB layout (FLIP-41). */
    @SuppressWarnings("unchecked")
    static void pair(String op, int maxParallelism, TypeSerializer<Object> keySer, Meta m, byte[] key, byte[] value) throws Exception {
        int prefix = CompositeKeySerializationUtils.computeRequiredBytesInKeyGroupPrefix(maxParallelism);
        DataInputDeserializer kin = new DataInputDeserializer(key, prefix, key.length - prefix);
        if (m.kind.equals("TIMERS")) {
            timer(op, m, m.value.deserialize(kin));
            return;
        }
        boolean ambiguous = CompositeKeySerializationUtils.isAmbiguousKeyPossible(keySer, m.ns);
        Object k = CompositeKeySerializationUtils.readKey(keySer, kin, ambiguous);
        Object ns = CompositeKeySerializationUtils.readNamespace(m.ns, kin, ambiguous);
        Entry e = entry(op, m, keySer, k, ns);
        DataInputDeserializer vin = new DataInputDeserializer(value);
        switch (m.kind) {
            case "MAP": {
                MapSerializer<Object, Object> ms = (MapSerializer<Object, Object>) (TypeSerializer<?>) m.value;
                Object uk = ms.getKeySerializer().deserialize(kin);
                Object uv = vin.readBoolean() ? null : ms.getValueSerializer().deserialize(vin);
                if (e.map == null) e.map = new TreeMap<>();
                e.map.put(render(uk, ms.getKeySerializer()), render(uv, ms.getValueSerializer()));
                break;
            }
            case "LIST": {
                ListSerializer<Object> ls = (ListSerializer<Object>) (TypeSerializer<?>) m.value;
                List<Object> elements = new ListDelimitedSerializer().deserializeList(value, ls.getElementSerializer());
                if (e.parts == null) e.parts = new ArrayList<>();
                for (Object x : elements) e.parts.add(render(x, ls.getElementSerializer()));
                break;
            }
            default:
                e.value = render(m.value.deserialize(vin), m.value);
        }
    }

    @SuppressWarnings("unchecked")
    static void readRocksDb(String op, int maxParallelism, IncrementalRemoteKeyedStateHandle h) throws Exception {
        KeyedBackendSerializationProxy<Object> proxy = new KeyedBackendSerializationProxy<>(CL);
        try (FSDataInputStream in = h.getMetaDataStateHandle().openInputStream()) {
            proxy.read(new DataInputViewStreamWrapper(in));
        }
        TypeSerializer<Object> keySer = (TypeSerializer<Object>) proxy.getKeySerializerSnapshot().restoreSerializer();
        List<Meta> metas = metas(op, proxy);
        File db = Files.createTempDirectory("statereader-rocksdb").toFile();
        try {
            List<IncrementalKeyedStateHandle.HandleAndLocalPath> files = new ArrayList<>(h.getSharedState());
            files.addAll(h.getPrivateState());
            for (IncrementalKeyedStateHandle.HandleAndLocalPath f : files) {
                try (InputStream fin = f.getHandle().openInputStream()) {
                    Files.copy(fin, new File(db, f.getLocalPath()).toPath(), StandardCopyOption.REPLACE_EXISTING);
                }
            }
            RocksDB.loadLibrary();
            List<ColumnFamilyDescriptor> cfs = new ArrayList<>();
            ColumnFamilyOptions cfo = new ColumnFamilyOptions().setMergeOperatorName("stringappendtest");
            cfs.add(new ColumnFamilyDescriptor(RocksDB.DEFAULT_COLUMN_FAMILY, cfo));
            for (Meta m : metas) cfs.add(new ColumnFamilyDescriptor(m.name.getBytes(StandardCharsets.UTF_8), cfo));
            List<ColumnFamilyHandle> handles = new ArrayList<>();
            try (DBOptions opts = new DBOptions(); RocksDB rdb = RocksDB.openReadOnly(opts, db.getAbsolutePath(), cfs, handles)) {
                for (int i = 0; i < metas.size(); i++) {
                    try (RocksIterator it = rdb.newIterator(handles.get(i + 1))) {
                        for (it.seekToFirst(); it.isValid(); it.next()) {
                            byte[] key = it.key();
                            int kg = keyGroupOf(maxParallelism, key);
                            if (!h.getKeyGroupRange().contains(kg)) continue;
                            pair(op, maxParallelism, keySer, metas.get(i), key, it.value());
                        }
                    }
                }
                for (ColumnFamilyHandle c : handles) c.close();
            }
        } finally {
            deleteTree(db);
        }
    }

    /** The key group of a RocksDB key: its big-endian prefix of one or two bytes. */
    static int keyGroupOf(int maxParallelism, byte[] key) {
        int prefix = CompositeKeySerializationUtils.computeRequiredBytesInKeyGroupPrefix(maxParallelism);
        int kg = 0;
        for (int i = 0; i < prefix; i++) kg = (kg << 8) | (key[i] & 0xFF);
        return kg;
    }

    static void deleteTree(File f) {
        File[] children = f.listFiles();
        if (children != null) for (File c : children) deleteTree(c);
        f.delete();
    }

    // ------------------------------------------------------------------ operator state

    @SuppressWarnings("unchecked")
    static void readOperator(String op, OperatorStateHandle h) throws Exception {
        try (FSDataInputStream in = h.openInputStream()) {
            DataInputViewStreamWrapper view = new DataInputViewStreamWrapper(in);
            OperatorBackendSerializationProxy proxy = new OperatorBackendSerializationProxy(CL);
            proxy.read(view);
            for (StateMetaInfoSnapshot s : proxy.getOperatorStateMetaInfoSnapshots()) {
                String mode = s.getOption(StateMetaInfoSnapshot.CommonOptionsKeys.OPERATOR_STATE_DISTRIBUTION_MODE);
                declare(op, s.getName(), "operator", mode);
                TypeSerializer<Object> ser = (TypeSerializer<Object>) restore(s.getTypeSerializerSnapshot(StateMetaInfoSnapshot.CommonSerializerKeys.VALUE_SERIALIZER));
                OperatorStateHandle.StateMetaInfo offsets = h.getStateNameToPartitionOffsets().get(s.getName());
                if (offsets == null) continue;
                Map<String, Entry> entries = ENTRIES.get(op + "\u0000" + s.getName());
                for (long offset : offsets.getOffsets()) {
                    in.seek(offset);
                    Entry e = new Entry();
                    e.key = "null";
                    e.ns = "null";
                    e.value = render(ser.deserialize(view), ser);
                    entries.put(entries.size() + "\u0000" + offset, e);
                }
            }
            for (StateMetaInfoSnapshot s : proxy.getBroadcastStateMetaInfoSnapshots()) {
                declare(op, s.getName(), "operator", "BROADCAST");
                TypeSerializer<Object> ks = (TypeSerializer<Object>) restore(s.getTypeSerializerSnapshot(StateMetaInfoSnapshot.CommonSerializerKeys.KEY_SERIALIZER));
                TypeSerializer<Object> vs = (TypeSerializer<Object>) restore(s.getTypeSerializerSnapshot(StateMetaInfoSnapshot.CommonSerializerKeys.VALUE_SERIALIZER));
                OperatorStateHandle.StateMetaInfo offsets = h.getStateNameToPartitionOffsets().get(s.getName());
                if (offsets == null) continue;
                Map<String, Entry> entries = ENTRIES.get(op + "\u0000" + s.getName());
                in.seek(offsets.getOffsets()[0]);
                int n = view.readInt();
                for (int i = 0; i < n; i++) {
                    Entry e = new Entry();
                    e.key = render(ks.deserialize(view), ks);
                    e.ns = "null";
                    e.value = render(vs.deserialize(view), vs);
                    entries.put(entries.size() + "\u0000" + e.key, e);
                }
            }
        }
    }

    // ------------------------------------------------------------------ output

    static void write(File file) throws Exception {
        List<String> lines = new ArrayList<>();
        for (Map.Entry<String, String[]> s : STATES.entrySet()) {
            String[] d = s.getValue();
            Map<String, Entry> entries = ENTRIES.get(s.getKey());
            lines.add("{\"op\":" + js(d[0]) + ",\"state\":" + js(d[1]) + ",\"scope\":" + js(d[2]) + ",\"kind\":" + js(d[3])
                    + ",\"entries\":" + entries.size() + "}");
            for (Entry e : entries.values()) {
                String value;
                if (e.map != null) value = mapJson(e.map);
                else if (e.parts != null) {
                    if (d[3].equals("TIMERS")) e.parts.sort(Comparator.comparingLong(Long::parseLong));
                    value = "[" + String.join(",", e.parts) + "]";
                }
                else value = (String) e.value;
                lines.add("{\"op\":" + js(d[0]) + ",\"state\":" + js(d[1]) + ",\"key\":" + e.key + ",\"ns\":" + e.ns + ",\"value\":" + value + "}");
            }
        }
        Files.writeString(file.toPath(), String.join("\n", lines) + "\n", StandardCharsets.UTF_8);
    }

    /** A map of rendered keys to rendered values: an object when every key is a string. */
    static String mapJson(Map<String, String> m) {
        boolean strings = m.keySet().stream().allMatch(k -> k.startsWith("\""));
        List<String> parts = new ArrayList<>();
        for (Map.Entry<String, String> e : m.entrySet())
            parts.add(strings ? e.getKey() + ":" + e.getValue() : "{\"key\":" + e.getKey() + ",\"value\":" + e.getValue() + "}");
        return strings ? "{" + String.join(",", parts) + "}" : "[" + String.join(",", parts) + "]";
    }

    static String js(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static LogicalType[] rowTypes(TypeSerializer<?> s) {
        try {
            java.lang.reflect.Field f = RowDataSerializer.class.getDeclaredField("types");
            f.setAccessible(true);
            return (LogicalType[]) f.get(s);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Calls a no-argument method by name (classes of the table runtime and CEP, by name). */
    static Object call(Object o, String method) {
        try {
            java.lang.reflect.Method m;
            try {
                m = o.getClass().getMethod(method);
            } catch (NoSuchMethodException e) {
                m = o.getClass().getDeclaredMethod(method); // package-private getters (CEP)
            }
            m.setAccessible(true);
            return m.invoke(o);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(o.getClass().getName() + "." + method, e);
        }
    }

    static boolean has(Object o, String method) {
        try {
            o.getClass().getMethod(method);
            return true;
        } catch (NoSuchMethodException e) {
            try {
                o.getClass().getDeclaredMethod(method);
                return true;
            } catch (NoSuchMethodException e2) {
                return false;
            }
        }
    }

    static String list(Collection<?> items, java.util.function.Function<Object, String> each, boolean sorted) {
        List<String> parts = new ArrayList<>();
        for (Object x : items) parts.add(each.apply(x));
        if (sorted) parts.sort(Comparator.naturalOrder());
        return "[" + String.join(",", parts) + "]";
    }

    /** A value in statectl's canonical JSON form, given its serializer (for nested types). */
    @SuppressWarnings("unchecked")
    static String render(Object v, TypeSerializer<?> ser) {
        if (v == null) return "null";
        String cls = v.getClass().getName();
        if (v instanceof RowData && ser instanceof RowDataSerializer) return row((RowData) v, rowTypes(ser));
        if (v instanceof Map && ser != null && has(ser, "getKeySerializer") && has(ser, "getValueSerializer")) {
            TypeSerializer<?> ks = (TypeSerializer<?>) call(ser, "getKeySerializer");
            TypeSerializer<?> vs = (TypeSerializer<?>) call(ser, "getValueSerializer");
            Map<String, String> m = new TreeMap<>();
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) m.put(render(e.getKey(), ks), render(e.getValue(), vs));
            return mapJson(m);
        }
        if (v instanceof Collection && ser != null && has(ser, "getElementSerializer")) {
            TypeSerializer<?> es = (TypeSerializer<?>) call(ser, "getElementSerializer");
            return list((Collection<?>) v, x -> render(x, es), false);
        }
        if (v instanceof Tuple && ser instanceof org.apache.flink.api.java.typeutils.runtime.TupleSerializerBase) {
            TypeSerializer<?>[] fs = ((org.apache.flink.api.java.typeutils.runtime.TupleSerializerBase<?>) ser).getFieldSerializers();
            Tuple t = (Tuple) v;
            List<String> parts = new ArrayList<>();
            for (int i = 0; i < t.getArity(); i++) parts.add(render(t.getField(i), fs[i]));
            return "[" + String.join(",", parts) + "]";
        }
        if (cls.equals("org.apache.flink.cep.nfa.sharedbuffer.Lockable")) {
            TypeSerializer<?> es = ser != null && has(ser, "getElementSerializer") ? (TypeSerializer<?>) call(ser, "getElementSerializer") : null;
            return "{\"element\":" + render(call(v, "getElement"), es) + ",\"refCounter\":" + call(v, "getRefCounter") + "}";
        }
        return cep(v);
    }

    /** CEP's objects (docs/flink-types.md "CEP"): events ids, node ids, Dewey numbers, NFA states. */
    static String cep(Object v) {
        if (v == null) return "null";
        switch (v.getClass().getName()) {
            case "org.apache.flink.cep.nfa.sharedbuffer.EventId":
                return "[" + call(v, "getId") + "," + call(v, "getTimestamp") + "]";
            case "org.apache.flink.cep.nfa.sharedbuffer.NodeId":
                return "[" + cep(call(v, "getEventId")) + "," + js((String) call(v, "getPageName")) + "]";
            case "org.apache.flink.cep.nfa.DeweyNumber":
                return "[" + v.toString().replace('.', ',') + "]";
            case "org.apache.flink.cep.nfa.sharedbuffer.SharedBufferEdge":
                return "{\"deweyNumber\":" + cep(call(v, "getDeweyNumber")) + ",\"target\":" + cep(call(v, "getTarget")) + "}";
            case "org.apache.flink.cep.nfa.sharedbuffer.SharedBufferNode":
                return "{\"edges\":" + list((Collection<?>) call(v, "getEdges"), StateReader::cep, false) + "}";
            case "org.apache.flink.cep.nfa.sharedbuffer.Lockable":
                return "{\"element\":" + cep(call(v, "getElement")) + ",\"refCounter\":" + call(v, "getRefCounter") + "}";
            case "org.apache.flink.cep.nfa.ComputationState":
                return "{\"currentStateName\":" + js((String) call(v, "getCurrentStateName"))
                        + ",\"previousBufferEntry\":" + cep(call(v, "getPreviousBufferEntry"))
                        + ",\"version\":" + cep(call(v, "getVersion"))
                        + ",\"startTimestamp\":" + call(v, "getStartTimestamp")
                        + ",\"previousTimestamp\":" + call(v, "getPreviousTimestamp")
                        + ",\"startEventID\":" + cep(call(v, "getStartEventID")) + "}";
            case "org.apache.flink.cep.nfa.NFAState":
                // priority queues: their order is the comparator's, not data: sorted by text
                return "{\"partialMatches\":" + list((Collection<?>) call(v, "getPartialMatches"), StateReader::cep, true)
                        + ",\"completedMatches\":" + list((Collection<?>) call(v, "getCompletedMatches"), StateReader::cep, true) + "}";
            case "org.apache.flink.table.runtime.operators.window.TimeWindow":
                return "[" + call(v, "getStart") + "," + call(v, "getEnd") + "]";
            case "org.apache.flink.table.runtime.operators.window.CountWindow":
                return call(v, "getId").toString();
            default:
                return plain(v);
        }
    }

    static String row(RowData r, LogicalType[] types) {
        List<String> parts = new ArrayList<>();
        for (int i = 0; i < types.length; i++) parts.add(r.isNullAt(i) ? "null" : logical(RowData.createFieldGetter(types[i], i).getFieldOrNull(r), types[i]));
        return "[" + String.join(",", parts) + "]";
    }

    static String logical(Object v, LogicalType t) {
        if (v == null) return "null";
        if (v instanceof RowData) {
            return row((RowData) v, org.apache.flink.table.types.logical.utils.LogicalTypeChecks.getFieldTypes(t).toArray(new LogicalType[0]));
        }
        if (v instanceof org.apache.flink.table.data.RawValueData && t instanceof org.apache.flink.table.types.logical.RawType) {
            byte[] bytes = ((org.apache.flink.table.data.RawValueData<?>) v).toBytes(
                    (TypeSerializer) ((org.apache.flink.table.types.logical.RawType<?>) t).getTypeSerializer());
            return js(Base64.getEncoder().encodeToString(bytes));
        }
        if (v instanceof ArrayData && t instanceof ArrayType) {
            LogicalType et = ((ArrayType) t).getElementType();
            ArrayData.ElementGetter g = ArrayData.createElementGetter(et);
            ArrayData a = (ArrayData) v;
            List<String> parts = new ArrayList<>();
            for (int i = 0; i < a.size(); i++) parts.add(logical(g.getElementOrNull(a, i), et));
            return "[" + String.join(",", parts) + "]";
        }
        if (v instanceof MapData) {
            LogicalType kt = t instanceof MapType ? ((MapType) t).getKeyType() : ((MultisetType) t).getElementType();
            LogicalType vt = t instanceof MapType ? ((MapType) t).getValueType() : new org.apache.flink.table.types.logical.IntType(false);
            MapData m = (MapData) v;
            ArrayData.ElementGetter kg = ArrayData.createElementGetter(kt);
            ArrayData.ElementGetter vg = ArrayData.createElementGetter(vt);
            Map<String, String> out = new TreeMap<>();
            for (int i = 0; i < m.size(); i++)
                out.put(logical(kg.getElementOrNull(m.keyArray(), i), kt), logical(vg.getElementOrNull(m.valueArray(), i), vt));
            return mapJson(out);
        }
        return plain(v);
    }

    static String plain(Object v) {
        if (v == null) return "null";
        if (v instanceof String || v instanceof StringData || v instanceof Character) return js(v.toString());
        if (v instanceof Boolean || v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte) return v.toString();
        if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d)) return "\"NaN\"";
            if (Double.isInfinite(d)) return d > 0 ? "\"Infinity\"" : "\"-Infinity\"";
            return v instanceof Float ? Float.toString((Float) v) : Double.toString(d);
        }
        if (v instanceof TimestampData) return Long.toString(((TimestampData) v).getMillisecond());
        if (v instanceof DecimalData) return js(((DecimalData) v).toBigDecimal().toString());
        if (v instanceof java.math.BigDecimal) return js(v.toString());
        if (v instanceof byte[]) return js(Base64.getEncoder().encodeToString((byte[]) v));
        if (v instanceof TimeWindow) return "[" + ((TimeWindow) v).getStart() + "," + ((TimeWindow) v).getEnd() + "]";
        if (v instanceof Tuple) {
            Tuple t = (Tuple) v;
            List<String> parts = new ArrayList<>();
            for (int i = 0; i < t.getArity(); i++) parts.add(plain(t.getField(i)));
            return "[" + String.join(",", parts) + "]";
        }
        if (v instanceof List) {
            List<String> parts = new ArrayList<>();
            for (Object x : (List<?>) v) parts.add(plain(x));
            return "[" + String.join(",", parts) + "]";
        }
        if (v instanceof Map) {
            Map<String, String> m = new TreeMap<>();
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) m.put(plain(e.getKey()), plain(e.getValue()));
            return mapJson(m);
        }
        return "{\"@class\":" + js(v.getClass().getName()) + ",\"text\":" + js(String.valueOf(v)) + "}";
    }
}

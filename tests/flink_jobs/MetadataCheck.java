import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.FileInputStream;

import java.io.ByteArrayInputStream;
import java.io.IOException;

import org.apache.flink.connector.file.src.FileSourceSplitSerializer;
import org.apache.flink.connector.file.src.PendingSplitsCheckpointSerializer;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;

/**
 * Loads each {@code _metadata} given as an argument with Flink's own
 * {@code Checkpoints.loadCheckpointMetadata} (the code a restore runs first) and prints one line
 * per file: {@code OK<TAB>path<TAB>summary} (checkpoint id, operators, the checkpoint properties
 * where the release has them, bytes left unread, and each source coordinator's state read as a
 * restore of a FileSource reads it) or {@code FAIL<TAB>path<TAB>the exception}. With
 * {@code --mutations FILE MASKS}: the same for the file cut at every offset and with each byte
 * flipped, loaded from memory.
 * Compiled against each Flink release's jars by tests/flink_versions.py.
 */
public class MetadataCheck {
    public static void main(String[] args) throws Exception {
        if (args.length == 3 && args[0].equals("--mutations")) {
            mutations(args[1], args[2]);
            return;
        }
        for (String path : args) {
            try (DataInputStream in = new DataInputStream(new BufferedInputStream(new FileInputStream(path)))) {
                check(path, path, in);
            }
        }
    }

    /**
     * The file cut at every offset, then with every byte XORed with each mask (hex, comma
     * separated), each loaded from memory: one line per mutation, in that order.
     */
    static void mutations(String path, String masks) throws Exception {
        byte[] data = java.nio.file.Files.readAllBytes(java.nio.file.Paths.get(path));
        for (int n = 0; n < data.length; n++) {
            check("cut " + n, path, new DataInputStream(new java.io.ByteArrayInputStream(data, 0, n)));
        }
        for (String mask : masks.split(",")) {
            int m = Integer.parseInt(mask, 16);
            for (int i = 0; i < data.length; i++) {
                byte[] copy = data.clone();
                copy[i] ^= (byte) m;
                check("flip " + i + " " + mask, path, new DataInputStream(new java.io.ByteArrayInputStream(copy)));
            }
        }
    }

    /** Loads one {@code _metadata} from {@code in} ({@code path}: where its relative handles are). */
    static void check(String label, String path, DataInputStream in) {
        try {
            CheckpointMetadata m = Checkpoints.loadCheckpointMetadata(in, MetadataCheck.class.getClassLoader(), path);
            int trailing = in.available();
            Object properties;
            try {  // Flink 1.16 and later (metadata version 4)
                properties = CheckpointMetadata.class.getMethod("getCheckpointProperties").invoke(m);
            } catch (NoSuchMethodException e) {
                properties = null;
            }
            System.out.println("OK\t" + label + "\tid=" + m.getCheckpointId() + "\toperators="
                    + m.getOperatorStates().size() + "\tproperties=" + properties + "\ttrailing=" + trailing
                    + "\tcoordinators=" + coordinators(m));
        } catch (Throwable t) {
            System.out.println("FAIL\t" + label + "\t" + t.toString().replace('\n', ' '));
        }
    }

    /**
     * Each coordinator state read as {@code SourceCoordinator.deserializeCheckpoint} reads it (a
     * private method: its envelope is read here the same way), the enumerator checkpoint by
     * FileSource's own {@code PendingSplitsCheckpointSerializer}: "ok", or the first failure.
     */
    static String coordinators(CheckpointMetadata m) {
        for (OperatorState op : m.getOperatorStates()) {
            if (op.getCoordinatorState() == null) {
                continue;
            }
            byte[] bytes = op.getCoordinatorState().getData();
            try (ByteArrayInputStream bais = new ByteArrayInputStream(bytes);
                    DataInputViewStreamWrapper in = new DataInputViewStreamWrapper(bais)) {
                int serde = in.readInt();
                if (serde > 1) {
                    throw new IOException("Unsupported source coordinator serde version " + serde);
                }
                int enumVersion = in.readInt();
                byte[] enumBytes = new byte[in.readInt()];
                in.readFully(enumBytes);
                if (serde != 0 && bais.available() > 0) {
                    throw new IOException("Unexpected trailing bytes in enumerator checkpoint data");
                }
                new PendingSplitsCheckpointSerializer<>(FileSourceSplitSerializer.INSTANCE)
                        .deserialize(enumVersion, enumBytes);
            } catch (Throwable t) {
                return "FAIL " + op.getOperatorID() + " " + t.toString().replace('\n', ' ').replace('\t', ' ');
            }
        }
        return "ok";
    }
}

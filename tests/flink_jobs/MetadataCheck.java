import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.FileInputStream;

import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;

/**
 * Loads each {@code _metadata} given as an argument with Flink's own
 * {@code Checkpoints.loadCheckpointMetadata} (the code a restore runs first) and prints one line
 * per file: {@code OK<TAB>path<TAB>summary} (checkpoint id, operators, the checkpoint properties
 * where the release has them, bytes left unread) or {@code FAIL<TAB>path<TAB>the exception}.
 * Compiled against each Flink release's jars by tests/flink_versions.py.
 */
public class MetadataCheck {
    public static void main(String[] args) throws Exception {
        for (String path : args) {
            try (DataInputStream in = new DataInputStream(new BufferedInputStream(new FileInputStream(path)))) {
                CheckpointMetadata m = Checkpoints.loadCheckpointMetadata(in, MetadataCheck.class.getClassLoader(), path);
                int trailing = in.available();
                Object properties;
                try {  // Flink 1.16 and later (metadata version 4)
                    properties = CheckpointMetadata.class.getMethod("getCheckpointProperties").invoke(m);
                } catch (NoSuchMethodException e) {
                    properties = null;
                }
                System.out.println("OK\t" + path + "\tid=" + m.getCheckpointId() + "\toperators="
                        + m.getOperatorStates().size() + "\tproperties=" + properties + "\ttrailing=" + trailing);
            } catch (Throwable t) {
                System.out.println("FAIL\t" + path + "\t" + t.toString().replace('\n', ' '));
            }
        }
    }
}

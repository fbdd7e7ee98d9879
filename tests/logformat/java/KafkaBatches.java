import java.io.FileOutputStream;
import java.nio.ByteBuffer;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.SimpleRecord;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.Header;

public class KafkaBatches {
    public static void main(String[] args) throws Exception {
        Compression[] codecs = {Compression.NONE, Compression.gzip().build(), Compression.snappy().build(),
            Compression.lz4().build(), Compression.zstd().build()};
        try (FileOutputStream out = new FileOutputStream(args[0])) {
            long offset = 0;
            for (Compression c : codecs) {
                SimpleRecord[] recs = new SimpleRecord[200];
                for (int i = 0; i < recs.length; i++) {
                    byte[] value = ("value-" + i + "-" + "x".repeat(i % 97)).getBytes();
                    Header[] headers = i % 3 == 0 ? new Header[]{new RecordHeader("h" + i, value)} : new Header[0];
                    recs[i] = new SimpleRecord(1700000000000L + i, i % 2 == 0 ? null : ("k" + i).getBytes(), value, headers);
                }
                MemoryRecords mr = MemoryRecords.withRecords(offset, c, recs);
                ByteBuffer b = mr.buffer();
                byte[] bytes = new byte[b.remaining()];
                b.get(bytes);
                out.write(bytes);
                offset += recs.length;
            }
        }
    }
}

package tms.tests;

import java.io.IOException;
import java.util.Properties;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.generic.IndexedRecord;
import org.apache.hudi.common.model.OverwriteWithLatestAvroPayload;
import org.apache.hudi.common.util.Option;

/**
 * A payload class of a user's own, as tables in production carry them: of two versions of a
 * record, the one with the larger `val` is kept, whatever their order of writing.
 */
public class LargestValuePayload extends OverwriteWithLatestAvroPayload {

  public LargestValuePayload(GenericRecord record, Comparable orderingVal) {
    super(record, orderingVal);
  }

  public LargestValuePayload(Option<GenericRecord> record) {
    super(record);
  }

  @Override
  public OverwriteWithLatestAvroPayload preCombine(
      OverwriteWithLatestAvroPayload older, Schema schema, Properties properties) {
    try {
      Option<IndexedRecord> mine = getInsertValue(schema);
      Option<IndexedRecord> theirs = older.getInsertValue(schema);
      if (mine.isPresent() && theirs.isPresent() && value(theirs.get()) > value(mine.get())) {
        return older;
      }
      return this;
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public Option<IndexedRecord> combineAndGetUpdateValue(IndexedRecord current, Schema schema)
      throws IOException {
    Option<IndexedRecord> incoming = getInsertValue(schema);
    if (incoming.isPresent() && value(current) > value(incoming.get())) {
      return Option.of(current);
    }
    return incoming;
  }

  private static double value(IndexedRecord record) {
    Object value = ((GenericRecord) record).get("val");
    return value == null ? Double.NEGATIVE_INFINITY : ((Number) value).doubleValue();
  }
}

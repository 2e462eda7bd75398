import java.util.Arrays;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.IntSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.api.scala.typeutils.EitherSerializer;
import org.apache.flink.api.scala.typeutils.OptionSerializer;
import org.apache.flink.api.scala.typeutils.ScalaCaseClassSerializer;
import org.apache.flink.api.scala.typeutils.TraversableSerializer;
import org.apache.flink.api.scala.typeutils.UnitSerializer;

/**
 * Values serialized by the Scala API's serializers of Flink 1.20 (Flink 2.x has no Scala API),
 * printed as SerializerVectors.java prints its cases (same helper, same line format).
 */
public class ScalaVectors {

    @SuppressWarnings({"unchecked", "rawtypes"})
    static scala.collection.immutable.List<Object> list(Object... values) {
        return scala.collection.JavaConverters.asScalaBuffer(Arrays.asList(values)).toList();
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    public static void main(String[] args) throws Exception {
        OptionSerializer<String> options = new OptionSerializer<>(StringSerializer.INSTANCE);
        SerializerVectors.vector("Scala Option Some", options, scala.Option.apply("s"));
        SerializerVectors.vector("Scala Option None", options, scala.Option.empty());
        SerializerVectors.vector("undecodable:Option Scala Option of Option",
                new OptionSerializer<>(new OptionSerializer<>(LongSerializer.INSTANCE)),
                scala.Option.apply(scala.Option.empty()));
        TypeSerializer<?>[] pair = {StringSerializer.INSTANCE, IntSerializer.INSTANCE};
        ScalaCaseClassSerializer tuples = new ScalaCaseClassSerializer(scala.Tuple2.class, pair);
        SerializerVectors.vector("Scala case class Tuple2", tuples, new scala.Tuple2<>("a", -3));
        SerializerVectors.vector("Scala case class nested", new ScalaCaseClassSerializer(scala.Tuple2.class,
                new TypeSerializer<?>[] {tuples, options}), new scala.Tuple2<>(new scala.Tuple2<>("b", 1), scala.Option.empty()));
        EitherSerializer either = new EitherSerializer<>(StringSerializer.INSTANCE, LongSerializer.INSTANCE);
        SerializerVectors.vector("Scala Either Left", either, new scala.util.Left<>("l"));
        SerializerVectors.vector("Scala Either Right", either, new scala.util.Right<>(Long.MIN_VALUE));
        TraversableSerializer strings = new TraversableSerializer<>(StringSerializer.INSTANCE,
                "scala.collection.immutable.List.canBuildFrom[String]");
        SerializerVectors.vector("Scala List", strings, list("x", null, "y"));
        SerializerVectors.vector("Scala List empty", strings, list());
        SerializerVectors.vector("Scala Map", new TraversableSerializer<>(tuples,
                "scala.collection.immutable.Map.canBuildFrom[String, Int]"),
                scala.collection.immutable.Map$.MODULE$.empty().$plus(new scala.Tuple2<>("k", 7)));
        SerializerVectors.vector("Scala Unit", new UnitSerializer(), scala.runtime.BoxedUnit.UNIT);
    }
}

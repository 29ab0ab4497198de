"""Small files in a checkpoint, through Hadoop's file system: the checkpoint may be on HDFS, S3
or a local disk, wherever Spark keeps the query's own checkpoint."""
from __future__ import annotations


def hadoop_path(spark, path: str):
    """(Hadoop's Path, the file system it is on) in the driver's JVM: the instance every path of
    that scheme uses (Hadoop caches one per scheme and user)."""
    jvm = spark.sparkContext._jvm
    p = jvm.org.apache.hadoop.fs.Path(path)
    return p, p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def numbered_files(spark, directory: str) -> list[int]:
    """The numbers of the files named by a number in `directory` (a query's `offsets/`), sorted."""
    p, fs = hadoop_path(spark, directory)
    if not fs.exists(p):
        return []
    return sorted(int(s.getPath().getName()) for s in fs.listStatus(p) if s.getPath().getName().isdigit())


def read_text(spark, path: str, max_lines: int | None = None) -> str | None:
    """The file's text (its first `max_lines` lines), None when there is no such file."""
    jvm = spark.sparkContext._jvm
    p, fs = hadoop_path(spark, path)
    if not fs.exists(p):
        return None
    stream = fs.open(p)
    try:
        reader = jvm.java.io.BufferedReader(jvm.java.io.InputStreamReader(stream, "UTF-8"))
        lines = []
        while (max_lines is None or len(lines) < max_lines) and (line := reader.readLine()) is not None:
            lines.append(line)
        return "\n".join(lines)
    finally:
        stream.close()


def write_text(spark, path: str, text: str) -> None:
    """The file written whole in UTF-8 (replacing one that is there)."""
    write_bytes(spark, path, text.encode("utf-8"))


def write_bytes(spark, path: str, data: bytes) -> None:
    """The file written whole (replacing one that is there)."""
    p, fs = hadoop_path(spark, path)
    stream = fs.create(p, True)
    try:
        stream.write(bytearray(data))
    finally:
        stream.close()

#include "pert/error.hpp"
#include "pert/safetensors.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {

// A file holding `header` (raw JSON text) and `data_bytes` zero bytes.
fs::path write_raw(const TempDir& tmp, const std::string& header, size_t data_bytes, const std::string& name = "t.safetensors") {
  const fs::path p = tmp / name;
  write_file(p, safetensors_image(header, std::string(data_bytes, '\0')));
  return p;
}

}  // namespace

TEST_CASE("safetensors: F32, F16 and BF16 tensors read back exactly", "[safetensors]") {
  TempDir tmp;
  const std::vector<TestTensor> tensors = {{"a", "F32", {2, 3}, exact_values(6, 1)},
                                           {"b", "F16", {5}, exact_values(5, 2)},
                                           {"c", "BF16", {1, 2, 2}, exact_values(4, 3)},
                                           {"empty", "F32", {0, 4}, {}}};
  write_file(tmp / "m.safetensors", encode_safetensors(tensors, {{"format", "pt"}}));
  SafetensorsFile f(tmp / "m.safetensors");
  REQUIRE(f.tensors().size() == 4);
  CHECK(f.metadata().at("format") == "pt");
  for (const TestTensor& want : tensors) {
    auto it = std::find_if(f.tensors().begin(), f.tensors().end(), [&](const TensorView& t) { return t.name == want.name; });
    REQUIRE(it != f.tensors().end());
    CHECK(it->shape == want.shape);
    CHECK(dtype_name(it->dtype) == want.dtype);
    CHECK(read_f32(*it) == want.values);
  }
}

TEST_CASE("safetensors: malformed files are refused with the file and the problem named", "[safetensors]") {
  TempDir tmp;
  const std::string path = (tmp / "t.safetensors").string();
  const std::string f32_4 = R"("dtype":"F32","shape":[4])";

  SECTION("empty file") {
    write_file(tmp / "t.safetensors", "");
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "truncated");
  }
  SECTION("truncated inside the length field") {
    write_file(tmp / "t.safetensors", std::string(5, '\x10'));
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "truncated");
  }
  SECTION("file truncated inside the header") {
    std::string image = safetensors_image(R"({"a":{)" + f32_4 + R"(,"data_offsets":[0,16]}})", std::string(16, '\0'));
    write_file(tmp / "t.safetensors", image.substr(0, 20));
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "runs past the end of the file");
  }
  SECTION("file truncated inside the data") {
    std::string image = safetensors_image(R"({"a":{)" + f32_4 + R"(,"data_offsets":[0,16]}})", std::string(16, '\0'));
    write_file(tmp / "t.safetensors", image.substr(0, image.size() - 3));
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "'a'", "outside the data area");
  }
  SECTION("header length beyond the file") {
    std::string image = safetensors_image("{}", "");
    image[0] = char(0xff);
    image[1] = char(0x7f);
    write_file(tmp / "t.safetensors", image);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "header length 32767", "past the end");
  }
  SECTION("header length beyond the 100 MB limit") {
    std::string image = safetensors_image("{}", "");
    image[7] = char(0x01);
    write_file(tmp / "t.safetensors", image);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "exceeds");
  }
  SECTION("more tensors than the limit") {  // empty tensors: the header alone is the attack
    std::string header = "{";
    for (size_t i = 0; i <= kMaxSafetensorsTensors; ++i)
      header += (i ? "," : "") + ("\"t" + std::to_string(i) + R"(":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})");
    write_raw(tmp, header + "}", 0);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "65537 tensors exceed the limit of 65536");
  }
  SECTION("header not JSON") {
    write_raw(tmp, "{not json at all}", 0);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "invalid JSON");
  }
  SECTION("header not an object") {
    write_raw(tmp, "[1, 2]", 0);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "not a JSON object");
  }
  SECTION("header nested absurdly deep") {
    write_raw(tmp, "{\"a\":" + std::string(10000, '[') + std::string(10000, ']') + "}", 0);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "nested deeper");
  }
  SECTION("unknown dtype") {
    write_raw(tmp, R"({"w":{"dtype":"F17","shape":[4],"data_offsets":[0,16]}})", 16);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "'w'", "unknown dtype 'F17'");
  }
  SECTION("dtype that pert does not read") {
    write_raw(tmp, R"({"w":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 16);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "'w'", "I64 is not supported");
  }
  SECTION("data_offsets out of range") {
    write_raw(tmp, R"({"w":{)" + f32_4 + R"(,"data_offsets":[0,16]}})", 8);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "'w'", "outside the data area");
  }
  SECTION("data_offsets overlapping") {
    write_raw(tmp, R"({"a":{)" + f32_4 + R"(,"data_offsets":[0,16]},"b":{)" + f32_4 + R"(,"data_offsets":[8,24]}})", 24);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "'b' overlaps tensor 'a'");
  }
  SECTION("data_offsets of the wrong length for the shape") {
    write_raw(tmp, R"({"w":{)" + f32_4 + R"(,"data_offsets":[0,12]}})", 12);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "'w'", "span 12 bytes", "needs 16");
  }
  SECTION("data_offsets end before begin") {
    write_raw(tmp, R"({"w":{)" + f32_4 + R"(,"data_offsets":[16,0]}})", 16);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "'w'", "end before begin");
  }
  SECTION("data_offsets leaving a gap") {
    write_raw(tmp, R"({"w":{)" + f32_4 + R"(,"data_offsets":[4,20]}})", 20);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "unused bytes before tensor 'w'");
  }
  SECTION("bytes after the last tensor") {
    write_raw(tmp, R"({"w":{)" + f32_4 + R"(,"data_offsets":[0,16]}})", 20);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "4 trailing bytes");
  }
  SECTION("data_offsets not a pair of integers") {
    write_raw(tmp, R"({"w":{)" + f32_4 + R"(,"data_offsets":[0]}})", 16);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "'w'", "data_offsets must be [begin, end]");
    write_raw(tmp, R"({"w":{)" + f32_4 + R"(,"data_offsets":[0,-16]}})", 16);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "'w'", "non-negative integer");
  }
  SECTION("negative or fractional shape") {
    write_raw(tmp, R"({"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", 16);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "'w'", "shape entry");
    write_raw(tmp, R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,10]}})", 10);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "'w'", "shape entry");
  }
  SECTION("shape whose element count overflows") {
    write_raw(tmp, R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})", 16);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "'w'", "overflows");
  }
  SECTION("missing and unknown entry fields") {
    write_raw(tmp, R"({"w":{"dtype":"F32","data_offsets":[0,16]}})", 16);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "'w'", "missing field 'shape'");
    write_raw(tmp, R"({"w":{)" + f32_4 + R"(,"data_offsets":[0,16],"strides":[1]}})", 16);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "'w'", "unknown field 'strides'");
    write_raw(tmp, R"({"w":[1,2]})", 0);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "'w'", "must be an object");
  }
  SECTION("metadata that is not strings") {
    write_raw(tmp, R"({"__metadata__":{"format":1}})", 0);
    REQUIRE_THROWS_NAMING(SafetensorsFile(path), FormatError, path, "__metadata__");
  }
  SECTION("not a file") {
    REQUIRE_THROWS_NAMING(SafetensorsFile(tmp / "absent.safetensors"), IoError, "absent.safetensors", "cannot open");
    REQUIRE_THROWS_NAMING(SafetensorsFile(tmp.path), IoError, tmp.path.string(), "not a regular file");
  }
}

TEST_CASE("safetensors: sharded checkpoints through the index", "[safetensors]") {
  TempDir tmp;
  const std::vector<TestTensor> shard1 = {{"a", "F32", {3}, exact_values(3, 1)}, {"b", "F16", {2}, exact_values(2, 2)}};
  const std::vector<TestTensor> shard2 = {{"c", "BF16", {4}, exact_values(4, 3)}};
  write_file(tmp / "model-00001-of-00002.safetensors", encode_safetensors(shard1));
  write_file(tmp / "model-00002-of-00002.safetensors", encode_safetensors(shard2));
  json index = {{"metadata", {{"total_size", 24}}},
                {"weight_map",
                 {{"a", "model-00001-of-00002.safetensors"},
                  {"b", "model-00001-of-00002.safetensors"},
                  {"c", "model-00002-of-00002.safetensors"}}}};
  const fs::path index_path = tmp / "model.safetensors.index.json";

  SECTION("valid") {
    write_file(index_path, index.dump());
    Checkpoint ck = Checkpoint::open(tmp.path);
    CHECK(ck.files().size() == 2);
    REQUIRE(ck.tensors().size() == 3);
    CHECK(read_f32(*ck.find("c")) == shard2[0].values);
    CHECK(read_f32(*ck.find("b")) == shard1[1].values);
    CHECK(ck.find("d") == nullptr);
  }
  SECTION("index lists a tensor its shard lacks") {
    index["weight_map"]["d"] = "model-00002-of-00002.safetensors";
    write_file(index_path, index.dump());
    REQUIRE_THROWS_NAMING(Checkpoint::open(tmp.path), FormatError, "model-00002-of-00002.safetensors", "no tensor 'd'");
  }
  SECTION("shard holds a tensor the index maps elsewhere") {
    index["weight_map"]["c"] = "model-00001-of-00002.safetensors";
    write_file(index_path, index.dump());
    REQUIRE_THROWS_NAMING(Checkpoint::open(tmp.path), FormatError, "model-00001-of-00002.safetensors", "no tensor 'c'");
  }
  SECTION("shard holds a tensor the index does not list") {
    index["weight_map"].erase("b");
    write_file(index_path, index.dump());
    REQUIRE_THROWS_NAMING(Checkpoint::open(tmp.path), FormatError, "model-00001-of-00002.safetensors", "'b' is not mapped");
  }
  SECTION("index names a file outside the directory") {
    index["weight_map"]["c"] = "../model-00002-of-00002.safetensors";
    write_file(index_path, index.dump());
    REQUIRE_THROWS_NAMING(Checkpoint::open(tmp.path), FormatError, index_path.string(), "not a file in the model directory");
  }
  SECTION("index names a missing shard") {
    index["weight_map"]["c"] = "model-00003-of-00002.safetensors";
    write_file(index_path, index.dump());
    REQUIRE_THROWS_NAMING(Checkpoint::open(tmp.path), IoError, "model-00003-of-00002.safetensors", "cannot open");
  }
  SECTION("index is not JSON") {
    write_file(index_path, "{\"weight_map\": ");
    REQUIRE_THROWS_NAMING(Checkpoint::open(tmp.path), FormatError, index_path.string(), "invalid JSON");
  }
  SECTION("index without a weight_map") {
    write_file(index_path, R"({"metadata": {}})");
    REQUIRE_THROWS_NAMING(Checkpoint::open(tmp.path), FormatError, index_path.string(), "weight_map");
  }
  SECTION("no weights at all") {
    REQUIRE_THROWS_NAMING(Checkpoint::open(tmp.path), IoError, tmp.path.string(), "no model.safetensors");
  }
}

// SafetensorsWriter (qgru/io/safetensors.h): a file written one tensor at a time is the file write_safetensors
// writes for the same tensors, byte for byte; read_safetensors_layout reads back the layout without the data;
// misuse is refused naming the file and the tensor, and an uncommitted writer leaves no file.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "io_test_util.h"
#include "qgru/io/safetensors.h"

using io_test::check_error;
using qgru::DType;
using qgru::SafetensorsFile;
using qgru::SafetensorsWriter;
using qgru::TensorLayout;

namespace {

SafetensorsFile every_dtype_file() {
  SafetensorsFile file;
  uint32_t seed = 1;
  for (DType dtype : io_test::all_dtypes()) {
    file.tensors[std::string("t.") + qgru::dtype_name(dtype)] = io_test::random_tensor(dtype, {3, 5}, seed++);
  }
  file.tensors["empty"] = io_test::random_tensor(DType::F32, {0, 7}, seed++);
  file.tensors["scalar"] = io_test::random_tensor(DType::I64, {}, seed++);
  file.metadata = {{"format", "pt"}, {"quantizer", "test"}};
  return file;
}

std::map<std::string, TensorLayout> layout_of(const SafetensorsFile& file) {
  std::map<std::string, TensorLayout> layout;
  for (const auto& [name, tensor] : file.tensors) layout[name] = {tensor.dtype, tensor.shape};
  return layout;
}

}  // namespace

TEST_CASE("a safetensors file written tensor by tensor is write_safetensors' file, and its layout reads back") {
  const io_test::Scratch scratch("writer_bytes");
  const SafetensorsFile file = every_dtype_file();
  qgru::write_safetensors(scratch.path("whole.safetensors"), file);
  {
    SafetensorsWriter writer(scratch.path("streamed.safetensors"), layout_of(file), file.metadata);
    for (const auto& [name, tensor] : file.tensors) {
      CHECK(writer.next_name() == name);
      writer.write(name, tensor);
    }
    CHECK(writer.next_name().empty());
    CHECK(scratch.file_count() == 2);  // whole.safetensors and the writer's temporary; nothing at the target yet
    writer.commit();
  }
  CHECK(io_test::file_bytes(scratch.path("streamed.safetensors")) == io_test::file_bytes(scratch.path("whole.safetensors")));
  const auto layout = qgru::read_safetensors_layout(scratch.path("streamed.safetensors"));
  REQUIRE(layout.size() == file.tensors.size());
  for (const auto& entry : file.tensors) {
    const std::string& name = entry.first;  // not a structured binding: CAPTURE's lambda takes it (C++17)
    CAPTURE(name);
    CHECK(layout.at(name).dtype == entry.second.dtype);
    CHECK(layout.at(name).shape == entry.second.shape);
  }
  CHECK(scratch.file_count() == 2);
}

TEST_CASE("SafetensorsWriter refuses tensors out of order, unknown or unlike their layout, and an early commit") {
  const io_test::Scratch scratch("writer_refusals");
  const SafetensorsFile file = every_dtype_file();
  const std::string path = scratch.path("out.safetensors");
  const auto first = file.tensors.begin();
  const auto second = std::next(first);
  {
    SafetensorsWriter writer(path, layout_of(file), file.metadata);
    check_error([&] { writer.write(second->first, second->second); },
                {path, "tensor '" + second->first + "'", "out of order", "expected '" + first->first + "' next"});
    check_error([&] { writer.write("nowhere", first->second); }, {path, "tensor 'nowhere'", "not in the layout"});
    qgru::Tensor wrong = io_test::random_tensor(first->second.dtype, {5, 3}, 99);
    check_error([&] { writer.write(first->first, wrong); },
                {path, "tensor '" + first->first + "'", "as laid out, got", "[5, 3]"});
    check_error([&] { writer.commit(); }, {path, "tensor '" + first->first + "'", "not written"});
    writer.write(first->first, first->second);
  }  // destroyed uncommitted: no file, no temporary
  CHECK(scratch.file_count() == 0);
  check_error([&] { SafetensorsWriter bad(path, {{"x", TensorLayout{DType::F32, {-1}}}}, {}); },
              {path, "tensor 'x'", "non-negative extents"});
  check_error([&] { SafetensorsWriter bad(path, {{"__metadata__", TensorLayout{DType::F32, {1}}}}, {}); },
              {path, "reserved key"});
  CHECK(scratch.file_count() == 0);
}

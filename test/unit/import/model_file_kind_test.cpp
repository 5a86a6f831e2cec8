// Model files recognised by their first bytes, and the refusal of every kind qgru does not read as weights.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "qgru/import/load_float_gru.h"
#include "qgru/import/model_file_kind.h"

namespace {

std::string write_bytes(const std::string& name, const std::string& bytes) {
  const std::string path = (std::filesystem::temp_directory_path() / ("model_file_kind_test_" + name)).string();
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// A zip's first local header naming `member` (only the fields the sniffer reads need to be right).
std::string zip_with(const std::string& member) {
  std::string header("PK\x03\x04", 4);
  header += std::string(22, '\0');
  header += static_cast<char>(member.size() & 0xff);
  header += static_cast<char>(member.size() >> 8);
  header += std::string(2, '\0');
  return header + member + "payload";
}

std::string load_error(const std::string& path) {
  try {
    qgru::load_float_gru(path);
  } catch (const qgru::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("model files are recognised by their first bytes, whatever their name") {
  using K = qgru::ModelFileKind;
  const std::string safetensors = std::string("\x0e\0\0\0\0\0\0\0", 8) + "{\"__metadata__\":{}}";
  CHECK(qgru::sniff_model_file(write_bytes("a.bin", safetensors)) == K::Safetensors);
  // ONNX: ir_version 8, then producer_name "pytorch".
  CHECK(qgru::sniff_model_file(write_bytes("b.bin", std::string("\x08\x08\x12\x07pytorch", 11))) == K::Onnx);
  CHECK(qgru::sniff_model_file(write_bytes("c.pt", zip_with("archive/data.pkl"))) == K::PyTorchZip);
  CHECK(qgru::sniff_model_file(write_bytes("d.pt", zip_with("gru/data.pkl"))) == K::PyTorchZip);
  CHECK(qgru::sniff_model_file(write_bytes("e.keras", zip_with("metadata.json"))) == K::KerasArchive);
  CHECK(qgru::sniff_model_file(write_bytes("f.npz", zip_with("x.npy"))) == K::NumpyArchive);
  CHECK(qgru::sniff_model_file(write_bytes("g.zip", zip_with("readme.txt"))) == K::Zip);
  CHECK(qgru::sniff_model_file(write_bytes("h.pt", std::string("\x80\x02\x8a\x0a", 4))) == K::Pickle);
  CHECK(qgru::sniff_model_file(write_bytes("i.npy", std::string("\x93NUMPY\x01\x00", 8))) == K::NumpyArray);
  CHECK(qgru::sniff_model_file(write_bytes("j.h5", std::string("\x89HDF\r\n\x1a\n", 8))) == K::Hdf5);
  CHECK(qgru::sniff_model_file(write_bytes("k.tflite", std::string("\x1c\0\0\0TFL3", 8))) == K::TfLite);
  CHECK(qgru::sniff_model_file(write_bytes("l.json", " {\"schema\": \"qgru.artifact\", \"version\": 1}")) == K::QgruArtifact);
  CHECK(qgru::sniff_model_file(write_bytes("m.json", "{\"a\": 1}")) == K::Json);
  // The writer sorts keys: "schema" comes after "cells", far past the first bytes, even across a read chunk.
  for (const size_t padding : {size_t{600}, size_t{65536 - 8}, size_t{200000}}) {
    const std::string late = "{\"cells\": \"" + std::string(padding, 'x') + "\", \"schema\": \"qgru.artifact\"}";
    CHECK(qgru::sniff_model_file(write_bytes("late_schema.json", late)) == K::QgruArtifact);
    const std::string other = "{\"cells\": \"" + std::string(padding, 'x') + "\", \"schema\": \"qgru.artifacts\"}";
    CHECK(qgru::sniff_model_file(write_bytes("other_schema.json", other)) == K::Json);
  }
  CHECK(qgru::sniff_model_file(write_bytes("n.bin", "hello")) == K::Unknown);
  CHECK_THROWS_WITH_AS(qgru::sniff_model_file("model_file_kind_test_missing"),
                       "model_file_kind_test_missing: cannot open the model file", qgru::Error);
}

TEST_CASE("a file that is not weights is refused with what it is and what to do") {
  const std::string pt = load_error(write_bytes("gru.pt", zip_with("archive/data.pkl")));
  CHECK(pt.find("this is a PyTorch checkpoint (torch.save zip archive)") != std::string::npos);
  CHECK(pt.find("safetensors.torch.save_file") != std::string::npos);
  CHECK(pt.find("torch.onnx.export") != std::string::npos);
  const std::string h5 = load_error(write_bytes("gru.h5", std::string("\x89HDF\r\n\x1a\n", 8)));
  CHECK(h5.find("an HDF5 file") != std::string::npos);
  CHECK(h5.find("tf2onnx") != std::string::npos);
  const std::string npy = load_error(write_bytes("w.npy", std::string("\x93NUMPY\x01\x00", 8)));
  CHECK(npy.find("arrays are data") != std::string::npos);
  const std::string artifact = load_error(write_bytes("q.qgru.json", "{\"schema\": \"qgru.artifact\"}"));
  CHECK(artifact.find("the float model the artifact was quantized from") != std::string::npos);
  // Not recognised: the safetensors reader's own message.
  CHECK(load_error(write_bytes("junk.bin", "hello, world")).find("model_file_kind_test_junk.bin: ") != std::string::npos);
}

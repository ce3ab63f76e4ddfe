#include "compiler/codegen/resources.h"

#include <regex>

#include "llvm/BinaryFormat/ELF.h"
#include "llvm/BinaryFormat/MsgPackDocument.h"
#include "llvm/Object/ELFObjectFile.h"

namespace mxfp6::codegen {

Resources parsePtxasResources(const std::string& out) {
  Resources r;
  std::smatch m;
  if (std::regex_search(out, m, std::regex(R"(Used (\d+) registers)"))) r.registers = std::stoi(m[1]);
  if (std::regex_search(out, m, std::regex(R"((\d+) bytes smem)"))) r.sharedBytes = std::stoi(m[1]);
  if (std::regex_search(out, m, std::regex(R"((\d+) bytes stack frame)"))) r.stackBytes = std::stoi(m[1]);
  return r;
}

namespace {

std::optional<int> intField(llvm::msgpack::MapDocNode& map, const char* key) {
  auto it = map.find(key);
  if (it == map.end() || it->second.getKind() != llvm::msgpack::Type::UInt) {
    if (it != map.end() && it->second.getKind() == llvm::msgpack::Type::Int) return int(it->second.getInt());
    return std::nullopt;
  }
  return int(it->second.getUInt());
}

}  // namespace

Expected<Resources> readHsacoResources(const std::string& hsaco, const std::string& entry) {
  auto object = llvm::object::ObjectFile::createELFObjectFile(llvm::MemoryBufferRef(hsaco, "hsaco"));
  if (!object) return Status::error("not an ELF code object: " + llvm::toString(object.takeError()));
  auto* elf = llvm::dyn_cast<llvm::object::ELF64LEObjectFile>(object->get());
  if (!elf || elf->getELFFile().getHeader().e_machine != llvm::ELF::EM_AMDGPU) return Status::error("not an AMDGPU ELF code object");
  const auto& file = elf->getELFFile();
  auto sections = file.sections();
  if (!sections) return Status::error("unreadable ELF sections: " + llvm::toString(sections.takeError()));
  for (const auto& section : *sections) {
    if (section.sh_type != llvm::ELF::SHT_NOTE) continue;
    llvm::Error err = llvm::Error::success();
    for (const auto& note : file.notes(section, err)) {
      if (note.getName() != "AMDGPU" || note.getType() != llvm::ELF::NT_AMDGPU_METADATA) continue;
      llvm::ArrayRef<uint8_t> desc = note.getDesc(section.sh_addralign);
      llvm::msgpack::Document doc;
      if (!doc.readFromBlob(llvm::StringRef(reinterpret_cast<const char*>(desc.data()), desc.size()), false))
        return Status::error("unreadable amdhsa metadata");
      auto& root = doc.getRoot();
      if (root.getKind() != llvm::msgpack::Type::Map) return Status::error("amdhsa metadata is not a map");
      auto kernels = root.getMap().find("amdhsa.kernels");
      if (kernels == root.getMap().end() || kernels->second.getKind() != llvm::msgpack::Type::Array)
        return Status::error("amdhsa metadata lists no kernels");
      for (auto& k : kernels->second.getArray()) {
        if (k.getKind() != llvm::msgpack::Type::Map) continue;
        auto& map = k.getMap();
        auto name = map.find(".name");
        if (name == map.end() || name->second.getKind() != llvm::msgpack::Type::String ||
            name->second.getString() != entry)
          continue;
        Resources r;
        r.registers = intField(map, ".vgpr_count");
        r.sgprs = intField(map, ".sgpr_count");
        r.sharedBytes = intField(map, ".group_segment_fixed_size");
        r.stackBytes = intField(map, ".private_segment_fixed_size");
        llvm::consumeError(std::move(err));
        return r;
      }
    }
    if (err) return Status::error("unreadable ELF notes: " + llvm::toString(std::move(err)));
  }
  return Status::error("the code object has no amdhsa metadata for kernel '" + entry + "'");
}

}  // namespace mxfp6::codegen

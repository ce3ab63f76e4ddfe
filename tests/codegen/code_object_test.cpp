// Binary stages are checked by their container, not byte for byte: an AMDGPU ELF for the right
// chip with the kernel symbol, its descriptor and amdhsa metadata naming the target; a CUDA ELF
// (cubin) with the kernel symbol. The launch metadata matches the kernel's ABI.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <regex>
#include <nlohmann/json.hpp>

#include "compiler/codegen/codegen.h"
#include "llvm/BinaryFormat/ELF.h"
#include "llvm/Object/ELFObjectFile.h"
#include "tests/codegen/kernel_fixture.h"

namespace mxfp6 {
namespace {

using codegen::Emit;

struct ElfFacts {
  unsigned machine = 0;
  unsigned flags = 0;
  std::vector<std::string> symbols;
  std::string notes;  // concatenated note descriptors (the amdhsa msgpack holds plain strings)
};

ElfFacts readElf(const std::string& bytes) {
  ElfFacts facts;
  auto object = llvm::object::ObjectFile::createELFObjectFile(llvm::MemoryBufferRef(bytes, "obj"));
  if (!object) {
    ADD_FAILURE() << "not an ELF file: " << llvm::toString(object.takeError());
    return facts;
  }
  auto* elf = llvm::cast<llvm::object::ELF64LEObjectFile>(object->get());
  const auto& file = elf->getELFFile();
  facts.machine = file.getHeader().e_machine;
  facts.flags = file.getHeader().e_flags;
  for (const auto& sym : elf->symbols())
    if (auto name = sym.getName()) facts.symbols.push_back(name->str());
    else llvm::consumeError(name.takeError());
  for (const auto& section : llvm::cantFail(file.sections())) {
    if (section.sh_type != llvm::ELF::SHT_NOTE) continue;
    llvm::Error err = llvm::Error::success();
    for (const auto& note : file.notes(section, err)) {
      auto desc = note.getDesc(section.sh_addralign);
      facts.notes.append(reinterpret_cast<const char*>(desc.data()), desc.size());
    }
    llvm::consumeError(std::move(err));
  }
  return facts;
}

bool hasSymbol(const ElfFacts& f, const std::string& name) {
  return std::find(f.symbols.begin(), f.symbols.end(), name) != f.symbols.end();
}

class LnModulateCodeObject : public ::testing::Test {
 protected:
  void SetUp() override {
    module_ = testing::parseKernelFile("ln_modulate.mxk");
    ASSERT_TRUE(module_);
    kernel_ = testing::instantiateOrFail(*module_, "ln_modulate_fwd", {});
    ASSERT_TRUE(kernel_);
  }
  codegen::CompiledKernel compile(const std::string& target, Emit emit) {
    Expected<codegen::CompiledKernel> c = codegen::compileKernel(*kernel_, *codegen::findTarget(target), emit);
    EXPECT_TRUE(c.isOk()) << c.status().message();
    return c.isOk() ? *c : codegen::CompiledKernel{};
  }
  std::optional<frontend::Module> module_;
  std::optional<kir::Kernel> kernel_;
};

TEST_F(LnModulateCodeObject, HsacoIsAnAmdgpuElfForEachChip) {
  // e_flags carry the chip: EF_AMDGPU_MACH_AMDGCN_GFX942 / _GFX950 in the low byte.
  for (auto [chip, mach] : {std::pair{"gfx942", llvm::ELF::EF_AMDGPU_MACH_AMDGCN_GFX942},
                            std::pair{"gfx950", llvm::ELF::EF_AMDGPU_MACH_AMDGCN_GFX950}}) {
    SCOPED_TRACE(chip);
    codegen::CompiledKernel c = compile(chip, Emit::Hsaco);
    ElfFacts f = readElf(c.bytes);
    EXPECT_EQ(f.machine, llvm::ELF::EM_AMDGPU);
    EXPECT_EQ(f.flags & llvm::ELF::EF_AMDGPU_MACH, unsigned(mach));
    EXPECT_TRUE(hasSymbol(f, "ln_modulate_fwd"));
    EXPECT_TRUE(hasSymbol(f, "ln_modulate_fwd.kd")) << "kernel descriptor missing";
    EXPECT_NE(f.notes.find("amdhsa.kernels"), std::string::npos);
    EXPECT_NE(f.notes.find(std::string("amdgcn-amd-amdhsa--") + chip), std::string::npos);
    // Resources come from the same metadata: the reductions' ring of 4 slots (twice the 2 that one
    // barrier may batch) of one float per wave, 6 waves of 64.
    ASSERT_TRUE(c.resources.sharedBytes.has_value());
    EXPECT_EQ(*c.resources.sharedBytes, 4 * (384 / 64) * 4);
    EXPECT_GT(c.resources.registers.value_or(0), 0);
  }
}

TEST_F(LnModulateCodeObject, CubinIsACudaElfWhenPtxasIsInstalled) {
  if (!testing::ptxasInstalled()) GTEST_SKIP() << "ptxas not installed: cubin is optional (PTX is checked by lit)";
  codegen::CompiledKernel c = compile("sm_90", Emit::Cubin);
  ElfFacts f = readElf(c.bytes);
  EXPECT_EQ(f.machine, unsigned(llvm::ELF::EM_CUDA));
  EXPECT_TRUE(hasSymbol(f, "ln_modulate_fwd"));
  EXPECT_GT(c.resources.registers.value_or(0), 0);
  EXPECT_EQ(c.resources.sharedBytes.value_or(-1), 4 * (384 / 32) * 4);  // 4 slots x 12 warps
}

TEST_F(LnModulateCodeObject, MetadataDescribesTheLaunch) {
  codegen::CompiledKernel c = compile("gfx942", Emit::Hsaco);
  nlohmann::json j = nlohmann::json::parse(c.metadataJson);
  EXPECT_EQ(j["kernel"], "ln_modulate_fwd");
  EXPECT_EQ(j["entry"], "ln_modulate_fwd");
  EXPECT_EQ(j["target"], "gfx942");
  std::vector<std::string> kinds, derived;
  for (const auto& a : j["abi"]) {
    if (a.contains("derived")) derived.push_back(a["name"]);
    else kinds.push_back(a["kind"]);
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"ptr", "ptr", "ptr", "ptr", "ptr", "ptr", "i32", "f32", "i64", "i64"}));
  // The runtime passes the multiplier and shift of each divisor: the sample's index t /
  // sample_div, wrapped % B.
  EXPECT_EQ(derived, (std::vector<std::string>{"divisor_multiplier(sample_div)", "divisor_shift(sample_div)",
                                               "divisor_multiplier(B)", "divisor_shift(B)"}));
  EXPECT_EQ(j["block"], nlohmann::json({384, 1, 1}));
  EXPECT_EQ(j["rows_per_program"], 1);
  EXPECT_EQ(j["alignment"], 16);  // VEC=8 bf16 = 16-byte accesses
  EXPECT_EQ(j["config"]["D"], 3072);
  // The tunables among config's keys, in the order ln_modulate.mxk declares them: D is a
  // specialized size, not one of them.
  std::vector<std::string> tunables;
  for (const auto& t : j["tunables"]) tunables.push_back(t);
  EXPECT_EQ(tunables, (std::vector<std::string>{"ROWS", "THREADS", "VEC", "SERIAL", "ASYNC", "ANCHOR"}));
  for (const std::string& t : tunables) EXPECT_TRUE(j["config"].contains(t)) << t;
}

// Runtime strides of 16-byte accesses must be multiples of 8 bf16 elements; the metadata says
// so for exactly those arguments, and the runtime checks it before every launch.
TEST(StrideMultiples, RecordedForStrideParametersOfVectorAccesses) {
  std::optional<frontend::Module> m = testing::parseKernelFile("norm_rope.mxk");
  ASSERT_TRUE(m);
  std::optional<kir::Kernel> k = testing::instantiateOrFail(*m, "norm_rope_qkv_fwd", {{"VEC", 8}, {"THREADS", 16}});
  ASSERT_TRUE(k);
  Expected<codegen::CompiledKernel> c = codegen::compileKernel(*k, *codegen::findTarget("gfx942"), Emit::Hsaco);
  ASSERT_TRUE(c.isOk()) << c.status().message();
  std::map<std::string, int64_t> multiples;
  nlohmann::json metadata = nlohmann::json::parse(c->metadataJson);
  for (const auto& a : metadata["abi"])
    if (a.contains("multiple_of")) multiples[a["name"]] = a["multiple_of"];
  EXPECT_EQ(multiples, (std::map<std::string, int64_t>{
                           {"qkv_token_stride", 8}, {"qkv_part_stride", 8}, {"qkv_head_stride", 8}}));
  // VEC = 2: 4-byte accesses need strides that are multiples of 2 elements only.
  k = testing::instantiateOrFail(*m, "norm_rope_qkv_fwd", {{"VEC", 2}, {"THREADS", 16}, {"ROWS", 4}});
  ASSERT_TRUE(k);
  c = codegen::compileKernel(*k, *codegen::findTarget("gfx942"), Emit::Hsaco);
  ASSERT_TRUE(c.isOk()) << c.status().message();
  metadata = nlohmann::json::parse(c->metadataJson);
  int strides = 0;
  for (const auto& a : metadata["abi"])
    if (a.contains("multiple_of")) {
      EXPECT_EQ(a["multiple_of"], 2) << a.dump();
      ++strides;
    }
  EXPECT_EQ(strides, 3);
}

/// The multiple_of the sm_90 metadata of `kernel` records, by ABI argument name.
std::map<std::string, int64_t> recordedMultiples(const frontend::Module& m, const char* kernel,
                                                 const std::map<std::string, int64_t>& config) {
  std::map<std::string, int64_t> found;
  std::optional<kir::Kernel> k = testing::instantiateOrFail(m, kernel, config);
  if (!k) return found;
  Expected<codegen::CompiledKernel> c = codegen::compileKernel(*k, *codegen::findTarget("sm_90"), Emit::Mlir);
  EXPECT_TRUE(c.isOk()) << c.status().message();
  if (!c.isOk()) return found;
  nlohmann::json metadata = nlohmann::json::parse(c->metadataJson);
  for (const auto& a : metadata["abi"])
    if (a.contains("multiple_of")) found[a["name"]] = a["multiple_of"];
  return found;
}

// A runtime size in a stride is required like a stride parameter, and only as far as the
// constants beside it do not already give the multiple: the prologue's row pitch RW steps its
// 96-byte runs of packed codes (16-byte stores), while LN-modulate backward's partials [P, B, D]
// step by P * 3072 elements, a multiple of anything its accesses need, so P is left free.
TEST(StrideMultiples, RecordedForRuntimeSizesOnlyWhereConstantsFallShort) {
  auto multiplesOf = [](const char* file, const char* kernel, const std::map<std::string, int64_t>& config) {
    std::optional<frontend::Module> m = testing::parseKernelFile(file);
    return m ? recordedMultiples(*m, kernel, config) : std::map<std::string, int64_t>{};
  };
  std::map<std::string, int64_t> prologue =
      multiplesOf("norm_rope_bwd_pack.mxk", "norm_rope_qkv_bwd_pack", {{"THREADS", 512}, {"VEC", 8}});
  EXPECT_EQ(prologue["RW"], 16);
  // The head's column offset h * qkv_head_stride starts a run: 3/4 of it is a multiple of 16 bytes.
  EXPECT_EQ(prologue["qkv_head_stride"], 64);
  EXPECT_EQ(prologue.count("RS"), 0u);
  EXPECT_EQ(prologue.count("TB"), 0u);  // column runs of 24 bytes step by TB * 24: 8-byte aligned
  std::map<std::string, int64_t> lnBwd = multiplesOf("ln_modulate.mxk", "ln_modulate_bwd", {});
  EXPECT_EQ(lnBwd.count("P"), 0u);
}

// What is required of a parameter or size is what every access needs of it at once (the lcm),
// and no more: a product asks its second factor only for what the first does not give, and a
// quotient that would not keep a multiple asks nothing of its dividend.
TEST(StrideMultiples, RequirementsAreTheLcmOfTheAccessesAndNoMore) {
  const std::string source = R"(
kernel lcm_case(x: f32[R, 4096], z: u8[R, 4096], y: out f32[R, 4096], w: out u8[R, 4096], n: u8[N])
  tune THREADS in {32} = 32, VEC in {16} = 16
{
  row r in R {
    y[r, N / 3 : 512] = x[r, 0 : 512]
    w[r, N : 512] = z[r, 0 : 512]
  }
}
kernel product_case(x: bf16[T, H, N], y: out bf16[T, H, N])
  tune THREADS in {32} = 32, VEC in {8} = 8
{
  row t, h in T, H {
    y[t, h, 0 : 256] = x[t, h, 0 : 256]
  }
}
kernel inexact_quotient(x: f32[R, 4096], y: out f32[R, 4096], n: u8[N])
  tune THREADS in {32} = 32, VEC in {4} = 4
{
  row r in R {
    y[r, (N + 1) / 2 : 128] = x[r, 0 : 128]
  }
}
)";
  frontend::DiagnosticEngine diags;
  std::optional<frontend::Module> m = frontend::parseSource("inline.mxk", source, diags);
  ASSERT_TRUE(m) << diags.render();
  auto multiples = [&](const char* kernel) { return recordedMultiples(*m, kernel, {}); };
  // N / 3 starts 64-byte f32 chunks (N a multiple of 12), N 16-byte u8 chunks (16): 48, not 16,
  // under which N / 3 = 5 would start the f32 chunks 20 bytes in.
  EXPECT_EQ(multiples("lcm_case"), (std::map<std::string, int64_t>{{"N", 48}}));
  // [T, H, N] steps tokens by N * H: N, also the head stride, carries the 8 elements alone.
  EXPECT_EQ(multiples("product_case"), (std::map<std::string, int64_t>{{"N", 8}}));
  // (N + 1) / 2 is no multiple of anything whatever N is: element accesses, nothing required.
  EXPECT_EQ(multiples("inexact_quotient"), (std::map<std::string, int64_t>{}));
}

/// The ABI arguments the sm_90 metadata of `k` requires a minimum of, and its index_bounds
/// (null where there are none).
std::pair<std::map<std::string, int64_t>, nlohmann::json> indexRequirements(const kir::Kernel& k) {
  std::map<std::string, int64_t> minimums;
  Expected<codegen::CompiledKernel> c = codegen::compileKernel(k, *codegen::findTarget("sm_90"), Emit::Mlir);
  EXPECT_TRUE(c.isOk()) << c.status().message();
  if (!c.isOk()) return {};
  nlohmann::json metadata = nlohmann::json::parse(c->metadataJson);
  for (const auto& a : metadata["abi"])
    if (a.contains("minimum")) minimums[a["name"]] = a["minimum"];
  return {minimums, metadata.contains("index_bounds") ? metadata["index_bounds"] : nlohmann::json()};
}

/// A loop counting to T * H whose induction value is divided by a size, an i32 and an i64 scalar.
constexpr const char* kLoopCase = R"(
kernel loop_case(x: f32[T, H, 8], y: out f32[P, 8], by32: i32, by64: i64)
  tune THREADS in {1} = 1, VEC in {8} = 8
{
  row j in P {
    var acc = zeros(8)
    for r in j .. T * H step P {
      t = r / H
      acc = acc + x[(t / by32) % T, r % H, :] + x[(t / by64) % T, 0, :]
    }
    y[j, :] = acc
  }
}
)";

// What the launch must guarantee for a loop's induction value and a division to be done in 32
// bits is recorded for the runtime to check: the product of sizes that bounds the loop, and a
// minimum of 1 for every scalar or size that divides (a zero divisor would make an index of
// garbage). A bound that is one size is already checked.
TEST(IndexRanges, TheLaunchGuaranteesAreRecorded) {
  const std::string source = std::string(kLoopCase) + R"(
kernel single_size_bound(x: f32[T, 8], y: out f32[P, 8], off: i32, div: i32)
  tune THREADS in {1} = 1, VEC in {8} = 8
{
  row j in P {
    var acc = zeros(8)
    for r in j .. T step P {
      acc = acc + x[((off - r) / div) % T, :]
    }
    y[j, :] = acc
  }
}
)";
  auto [minimums, bounds] = indexRequirements(testing::inlineKernel(source, "loop_case"));
  EXPECT_EQ(minimums, (std::map<std::string, int64_t>{{"by32", 1}, {"by64", 1}, {"H", 1}, {"T", 1}}));
  EXPECT_EQ(bounds, nlohmann::json::parse(R"([[{"dim": "T"}, {"dim": "H"}]])"));
  auto [singleMinimums, noBounds] = indexRequirements(testing::inlineKernel(source, "single_size_bound"));
  EXPECT_EQ(singleMinimums, (std::map<std::string, int64_t>{{"div", 1}, {"T", 1}}));
  EXPECT_TRUE(noBounds.is_null());

  // The shipped kernels: the backward's row loop, its position divisor and table size; the
  // forward's, where H, a row extent after the first, is divided by for the row's digits; the
  // packers divide by nothing.
  auto [bwdMinimums, bwdBounds] = indexRequirements(testing::kernelAt("norm_rope.mxk", "norm_rope_bwd", {}));
  EXPECT_EQ(bwdMinimums, (std::map<std::string, int64_t>{{"pos_div", 1}, {"H", 1}, {"S", 1}}));
  EXPECT_EQ(bwdBounds, nlohmann::json::parse(R"([[{"dim": "T"}, {"dim": "H"}]])"));
  auto [fwdMinimums, fwdBounds] = indexRequirements(testing::kernelAt("norm_rope.mxk", "norm_rope_fwd", {}));
  EXPECT_EQ(fwdMinimums, (std::map<std::string, int64_t>{{"pos_div", 1}, {"H", 1}, {"S", 1}}));
  EXPECT_TRUE(fwdBounds.is_null());
  auto [prologueMinimums, prologueBounds] =
      indexRequirements(testing::kernelAt("norm_rope_bwd_pack.mxk", "norm_rope_qkv_bwd_pack", {}));
  EXPECT_EQ(prologueMinimums, (std::map<std::string, int64_t>{{"pos_div", 1}, {"H", 1}, {"S", 1}}));
  // Its token positions tb * 32 + iota(32) are below TB * 32.
  EXPECT_EQ(prologueBounds, nlohmann::json::parse(R"([[{"dim": "TB"}, {"const": 32}]])"));
  EXPECT_TRUE(indexRequirements(testing::kernelAt("mxfp6_pack.mxk", "mxfp6_pack_dual", {})).first.empty());
}

/// The arguments whose multiplier and shift the metadata asks the runtime for, in order; each
/// multiplier must be followed by its shift.
std::vector<std::string> magicDivisors(const kir::Kernel& k) {
  Expected<codegen::CompiledKernel> c = codegen::compileKernel(k, *codegen::findTarget("sm_90"), Emit::Mlir);
  EXPECT_TRUE(c.isOk()) << c.status().message();
  if (!c.isOk()) return {};
  std::vector<std::string> divisors;
  const nlohmann::json abi = nlohmann::json::parse(c->metadataJson)["abi"];
  for (size_t i = 0; i < abi.size(); ++i) {
    if (!abi[i].contains("derived") || abi[i]["derived"] != "divisor_multiplier") continue;
    EXPECT_EQ(abi[i]["kind"], "i32");
    EXPECT_TRUE(i + 1 < abi.size() && abi[i + 1]["derived"] == "divisor_shift" && abi[i + 1]["of"] == abi[i]["of"]);
    divisors.push_back(abi[i]["of"]);
  }
  return divisors;
}

// Every unsigned 32-bit division by a scalar parameter or runtime size divides by the multiplier
// and shift the runtime computes for it (index_math.cpp); a signed one (of a dividend that may be
// negative) and a 64-bit one (by an i64 scalar) keep their division.
TEST(IndexRanges, RuntimeDivisorsTakeTheirMultipliers) {
  const std::string source = std::string(kLoopCase) + R"(
kernel signed_case(x: f32[T, 8], y: out f32[P, 8], off: i32, div: i32)
  tune THREADS in {1} = 1, VEC in {8} = 8
{
  row j in P {
    y[j, :] = x[((off - j) / div) % T, :]
  }
}
kernel positions(table: f32[S, 8], y: out f32[TB, 32, 8], div: i32)
  tune THREADS in {32} = 32, VEC in {1} = 1
{
  row tb in TB {
    p = ((tb * 32 + iota(32)) / div) % S
    y[tb, :, 0] = table[p, 0]
  }
}
kernel past_the_block(table: f32[S, 8], y: out f32[TB, 32, 8], div: i32)
  tune THREADS in {32} = 32, VEC in {1} = 1
{
  row tb in TB {
    p = ((tb * 16 + iota(32)) / div) % S
    y[tb, :, 0] = table[p, 0]
  }
}
)";
  EXPECT_EQ(magicDivisors(testing::inlineKernel(source, "loop_case")), (std::vector<std::string>{"by32", "T", "H"}));
  // A vector of positions below TB * 32 (the prologue's): the bound is recorded, and both the
  // division and the remainder take the multipliers; an offset as large as the constant it is
  // added to could pass the bound, so that one keeps its 64-bit division.
  EXPECT_EQ(magicDivisors(testing::inlineKernel(source, "positions")), (std::vector<std::string>{"div", "S"}));
  EXPECT_EQ(indexRequirements(testing::inlineKernel(source, "positions")).second,
            nlohmann::json::parse(R"([[{"dim": "TB"}, {"const": 32}]])"));
  EXPECT_TRUE(magicDivisors(testing::inlineKernel(source, "past_the_block")).empty());
  EXPECT_TRUE(indexRequirements(testing::inlineKernel(source, "past_the_block")).second.is_null());
  EXPECT_TRUE(magicDivisors(testing::inlineKernel(source, "signed_case")).empty());
  // The forward: the row's digits (by H), its position (by pos_div, then % S).
  EXPECT_EQ(magicDivisors(testing::kernelAt("norm_rope.mxk", "norm_rope_qkv_fwd", {})),
            (std::vector<std::string>{"pos_div", "H", "S"}));
  EXPECT_TRUE(magicDivisors(testing::kernelAt("mxfp6_pack.mxk", "mxfp6_pack_dual", {})).empty());
}

// By default the scale and shift loads move ahead of the two block reductions (so all three
// loads are in flight at once); PREFETCH = 0 keeps them where the body reads them.
TEST_F(LnModulateCodeObject, LoadsMoveAheadOfReductionsUnlessPrefetchIsOff) {
  auto loadsBeforeFirstBarrier = [&](const kir::Kernel& k) {
    Expected<codegen::CompiledKernel> c = codegen::compileKernel(k, *codegen::findTarget("sm_90"), Emit::Mlir);
    EXPECT_TRUE(c.isOk()) << c.status().message();
    std::string mlir = c.isOk() ? c->bytes : "";
    size_t barrier = mlir.find("gpu.barrier");
    int loads = 0;
    for (size_t at = mlir.find("llvm.load"); at < barrier; at = mlir.find("llvm.load", at + 1)) ++loads;
    return loads;
  };
  EXPECT_EQ(loadsBeforeFirstBarrier(*kernel_), 3);  // x, scale, shift
  kir::Kernel inOrder = *kernel_;
  inOrder.config["PREFETCH"] = 0;
  EXPECT_EQ(loadsBeforeFirstBarrier(inOrder), 1);  // x only
}

TEST_F(LnModulateCodeObject, ScheduleTheTargetCannotRunIsALocatedError) {
  // THREADS=128 with gfx942's 64-wide waves is fine; 96 threads is not a multiple of the wave.
  kir::Kernel bad = *kernel_;
  bad.threadsPerRow = 96;
  Expected<codegen::CompiledKernel> c = codegen::compileKernel(bad, *codegen::findTarget("gfx942"), Emit::Mlir);
  ASSERT_FALSE(c.isOk());
  EXPECT_NE(c.status().message().find("ln_modulate.mxk:"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("multiple of the gfx942 subgroup size 64"), std::string::npos)
      << c.status().message();
}

// Transposes of one type and size share a buffer, counted in the metadata's static shared bytes.
TEST(TileCodeObject, TransposeBuffersAreShared) {
  std::optional<frontend::Module> m = testing::parseKernelFile("norm_rope_bwd_pack.mxk");
  ASSERT_TRUE(m);
  std::optional<kir::Kernel> k = testing::instantiateOrFail(*m, "norm_rope_qkv_bwd_pack", {});
  ASSERT_TRUE(k);
  Expected<codegen::CompiledKernel> c = codegen::compileKernel(*k, *codegen::findTarget("sm_90"), Emit::Mlir);
  ASSERT_TRUE(c.isOk()) << c.status().message();
  // Five transposes: three of bf16 [32, 128] tiles, two of f32 ones: two buffers. The default
  // schedule (THREADS=256, VEC=8) gives each thread 8 elements of a row when writing and 8 rows of
  // a column per chunk when reading, so 4 bands of rows, which the layout shifts to 32 bytes apart
  // modulo 128: a skew of 32 bytes per band after the first, as the padded bands are multiples of
  // 128 bytes. The bf16 rows (256 bytes, whose 16-byte store phases cover 128 contiguous bytes)
  // are padded by 16 bytes at their end: 8 x 272. The f32 rows (512 bytes of 32-byte vectors, a
  // phase's lanes meeting 128 bytes on) by 16 bytes after every 128: 576 bytes, 8 x 576. Besides,
  // the staging of the packed stores: 6 bytes (8 codes) per thread.
  nlohmann::json metadata = nlohmann::json::parse(c->metadataJson);
  EXPECT_EQ(metadata["static_shared_bytes"], (32 * 136 * 2 + 3 * 32) + (32 * 576 + 3 * 32) + 256 * 6);
  EXPECT_EQ(metadata["shared_bytes"], 0) << "all of it static: nothing to pass at launch";
}

// A column packer of 8 rows of W=128 tiles per program (past the DSL's require, set on the
// instance): 8 x 32 x 144 bf16 of transpose buffer = 73728 bytes (one band: a thread holds a whole
// column; 16 bytes of padding after each 128 of a row, where the row's four 64-byte vectors would
// meet), and the staging of the 24-byte packed stores, 8 x 128 threads x 24 bytes = 24576.
std::optional<kir::Kernel> columnPackerOfRows(int rows) {
  static std::optional<frontend::Module> pack = testing::parseKernelFile("mxfp6_pack.mxk");
  if (!pack) return std::nullopt;
  std::optional<kir::Kernel> k = testing::instantiateOrFail(
      *pack, "mxfp6_pack_cols", {{"W", 128}, {"ROWS", 1}, {"THREADS", 128}, {"VEC", 32}});
  if (k) k->rowsPerProgram = rows;
  return k;
}

// Past the 48 KB a program may allocate statically on sm_90, the buffers are views of dynamic
// shared memory: declared external in the PTX (its base, not a static byte that the launch's bytes
// follow), every byte passed at launch, none static.
TEST(TileCodeObject, SharedMemoryPastTheStaticLimitIsPassedAtLaunch) {
  std::optional<kir::Kernel> k = columnPackerOfRows(8);
  ASSERT_TRUE(k);
  Expected<codegen::CompiledKernel> ptx = codegen::compileKernel(*k, *codegen::findTarget("sm_90"), Emit::Ptx);
  ASSERT_TRUE(ptx.isOk()) << ptx.status().message();
  nlohmann::json metadata = nlohmann::json::parse(ptx->metadataJson);
  EXPECT_EQ(metadata["shared_bytes"], 73728 + 24576);
  EXPECT_EQ(metadata["static_shared_bytes"], 0);
  EXPECT_NE(ptx->bytes.find(".extern .shared .align 16 .b8 __dynamic_shmem__0[];"), std::string::npos);
  size_t declarations = 0;
  for (size_t at = ptx->bytes.find(".shared .align"); at != std::string::npos; at = ptx->bytes.find(".shared .align", at + 1))
    ++declarations;
  EXPECT_EQ(declarations, 1u) << "no static shared buffer beside the dynamic one";

  if (!testing::ptxasInstalled()) GTEST_SKIP() << "ptxas not installed: the cubin's resources are optional";
  Expected<codegen::CompiledKernel> cubin = codegen::compileKernel(*k, *codegen::findTarget("sm_90"), Emit::Cubin);
  ASSERT_TRUE(cubin.isOk()) << cubin.status().message();
  nlohmann::json resources = nlohmann::json::parse(cubin->metadataJson)["resources"];
  // Residency counts the dynamic bytes: at most two programs of 96 KB (+1 KB each) in 228 KB.
  EXPECT_EQ(resources["shared_bytes"], 73728 + 24576);
  EXPECT_LE(resources["occupancy"]["programs_per_unit"].get<int>(), 2);
}

// A program whose buffers pass what the target grants is a located error naming the bytes and the
// target's limit, not a ptxas or llc failure: gfx942 allocates its 64 KB of LDS statically only,
// sm_90 opts into at most 227 KB.
TEST(TileCodeObject, SharedMemoryPastTheTargetsLimitIsALocatedError) {
  std::optional<kir::Kernel> k = columnPackerOfRows(8);
  ASSERT_TRUE(k);
  Expected<codegen::CompiledKernel> c = codegen::compileKernel(*k, *codegen::findTarget("gfx942"), Emit::Mlir);
  ASSERT_FALSE(c.isOk());
  EXPECT_NE(c.status().message().find("mxfp6_pack.mxk:"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("needs 98304 bytes of shared memory"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("more than the 65536 a program may use on gfx942"), std::string::npos)
      << c.status().message();
  EXPECT_TRUE(codegen::compileKernel(*k, *codegen::findTarget("gfx950"), Emit::Mlir).isOk()) << "160 KB of LDS";

  // Four rows of the dual packer's 256 x 128 tile per program: 4 x 64 KB of tile alone.
  static std::optional<frontend::Module> pack = testing::parseKernelFile("mxfp6_pack.mxk");
  ASSERT_TRUE(pack);
  k = testing::instantiateOrFail(*pack, "mxfp6_pack_dual", {{"W", 256}, {"HB", 4}, {"ROWS", 1}, {"THREADS", 256}, {"VEC", 32}});
  ASSERT_TRUE(k);
  k->rowsPerProgram = 4;
  c = codegen::compileKernel(*k, *codegen::findTarget("sm_90"), Emit::Mlir);
  ASSERT_FALSE(c.isOk());
  std::smatch needs;
  ASSERT_TRUE(std::regex_search(c.status().message(), needs, std::regex(R"(needs (\d+) bytes of shared memory)")))
      << c.status().message();
  EXPECT_GE(std::stol(needs[1]), 4 * 256 * 128 * 2);
  EXPECT_NE(c.status().message().find("more than the 232448 a program may use on sm_90"), std::string::npos)
      << c.status().message();
}

// The PTX of every kernel calls no external function: MLIR lowers some float ops (minnum, math
// functions) to libdevice calls, which it links only where it finds a CUDA toolkit ($CUDA_HOME);
// without one -- CI, a training node -- the PTX would name an undefined __nv_* function and fail
// to load. Compiled here with CUDA_HOME unset.
TEST(PtxCodeObject, EveryKernelCallsNoLibdeviceFunction) {
  const char* cudaHome = std::getenv("CUDA_HOME");
  std::string saved = cudaHome ? cudaHome : "";
  unsetenv("CUDA_HOME");
  for (const std::string& file : testing::kernelFiles()) {
    frontend::DiagnosticEngine diags;
    std::optional<frontend::Module> m = frontend::parseFile(file, diags);
    ASSERT_TRUE(m) << diags.render();
    for (const frontend::KernelInfo& info : m->kernels()) {
      SCOPED_TRACE(file + ": " + info.name);
      std::optional<kir::Kernel> k = testing::instantiateOrFail(*m, info.name, {});
      ASSERT_TRUE(k);
      Expected<codegen::CompiledKernel> c = codegen::compileKernel(*k, *codegen::findTarget("sm_90"), Emit::Ptx);
      ASSERT_TRUE(c.isOk()) << c.status().message();
      EXPECT_EQ(c->bytes.find(".extern"), std::string::npos) << "an external call in the PTX";
    }
  }
  if (cudaHome) setenv("CUDA_HOME", saved.c_str(), 1);
}

}  // namespace
}  // namespace mxfp6

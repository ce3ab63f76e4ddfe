// Every kernel of kernels_dsl/ and of the test fixtures compiles for every target at every
// configuration its tunables allow, and at every value of each variant, down to the code
// object (cubin needs ptxas; without it PTX is the last stage checked). Where a kernel's tuning
// space has more than kMaxConfigs configurations (the tile packers: W x ROWS x THREADS x VEC),
// a stated sample is compiled instead: kMaxConfigs configurations evenly spaced over the
// enumeration order (the first and the last included), plus the default and every variant.
// Configurations with asynchronous copies (ASYNC > 0) or predicated stores (PREDICATE = 1) must
// be refused, with the reason, on AMD; so must those needing more shared memory than a target
// grants, where sm_90 grants it, and MINPROGS counts whose shared memory one SM (CU) cannot hold,
// where the schedule compiles without them.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include "compiler/codegen/codegen.h"
#include "tests/codegen/kernel_fixture.h"

namespace mxfp6 {
namespace {

constexpr size_t kMaxConfigs = 16;
const std::regex kSharedRefusal(R"(needs (\d+) bytes of shared memory .* more than the (\d+) a program may use on (\w+);)");
const std::regex kResidencyRefusal(
    R"(MINPROGS = (\d+) programs of (\d+) bytes of shared memory cannot be resident on one (SM|CU) of (\w+):)");

/// The tuning space at default sizes (or its sample), the default config, and the default
/// config with each other variant value.
std::vector<std::map<std::string, int64_t>> configsOf(const frontend::Module& m, const frontend::KernelInfo& k) {
  std::vector<std::map<std::string, int64_t>> all = frontend::enumerateConfigs(m, k.name, {});
  std::vector<std::map<std::string, int64_t>> configs;
  if (all.size() <= kMaxConfigs) {
    configs = all;
  } else {
    for (size_t i = 0; i < kMaxConfigs; ++i) configs.push_back(all[i * (all.size() - 1) / (kMaxConfigs - 1)]);
    configs.push_back({});  // the default configuration
  }
  for (const frontend::VariantInfo& v : k.variants)
    for (const std::string& value : v.values)
      if (value != v.defaultValue)
        configs.push_back({{v.name, frontend::variantNameCode(*frontend::findVariantValue(value))}});
  return configs;
}

class AllConfigs : public ::testing::TestWithParam<std::string> {};

TEST_P(AllConfigs, CompileForEveryTarget) {
  frontend::DiagnosticEngine diags;
  std::optional<frontend::Module> m = frontend::parseFile(GetParam(), diags);
  ASSERT_TRUE(m) << diags.render();
  bool havePtxas = access("/usr/local/cuda/bin/ptxas", X_OK) == 0;
  int compiled = 0, refused = 0;
  for (const frontend::KernelInfo& info : m->kernels()) {
    auto configs = configsOf(*m, info);
    ASSERT_FALSE(configs.empty()) << info.name << ": no configuration satisfies the constraints";
    for (const std::string& targetName : codegen::targetNames()) {
      codegen::TargetInfo target = *codegen::findTarget(targetName);
      codegen::Emit emit = target.backend == codegen::Backend::ROCDL ? codegen::Emit::Hsaco
                           : havePtxas                                ? codegen::Emit::Cubin
                                                                      : codegen::Emit::Ptx;
      for (const auto& config : configs) {
        std::optional<kir::Kernel> k = testing::instantiateOrFail(*m, info.name, config);
        ASSERT_TRUE(k);
        std::string where = info.name + " for " + targetName + " at";
        for (const auto& [key, value] : k->config) where += " " + key + "=" + std::to_string(value);
        Expected<codegen::CompiledKernel> c = codegen::compileKernel(*k, target, emit);
        // The same schedule with its residency left to the compiler (MINPROGS = 0).
        auto unrequested = [&](const codegen::TargetInfo& on, codegen::Emit to) {
          auto without = config;
          if (k->config.count("MINPROGS")) without["MINPROGS"] = 0;
          std::optional<kir::Kernel> left = testing::instantiateOrFail(*m, info.name, without);
          return left ? codegen::compileKernel(*left, on, to)
                      : Expected<codegen::CompiledKernel>(Status::error("the schedule without MINPROGS does not instantiate"));
        };
        // Asynchronous copies (ASYNC > 0) are NVIDIA's: elsewhere the configuration is refused
        // with the reason, never compiled into something else.
        // Likewise predicated stores (PREDICATE = 1, inline PTX). ASYNC is checked first.
        auto async = k->config.find("ASYNC");
        auto predicate = k->config.find("PREDICATE");
        bool asyncHere = async != k->config.end() && async->second > 0;
        bool predicateHere = predicate != k->config.end() && predicate->second == 1;
        if ((asyncHere || predicateHere) && target.backend != codegen::Backend::NVVM) {
          ASSERT_FALSE(c.isOk()) << where;
          const char* reason = asyncHere ? "does not have; use ASYNC = 0 there" : "does not run; use PREDICATE = 0 there";
          EXPECT_NE(c.status().message().find(reason), std::string::npos) << where << ": " << c.status().message();
          ++refused;
          continue;
        }
        // A target granting less shared memory than the DSL's bounds allow (gfx942's 64 KB of LDS
        // against sm_90's 227 KB) refuses the configurations past it, naming the bytes; the
        // configuration must then compile where more is granted (without MINPROGS, whose count
        // the next check weighs against the shared memory of an SM).
        std::smatch needs;
        if (!c.isOk() && std::regex_search(c.status().message(), needs, kSharedRefusal) &&
            needs[2] == std::to_string(target.maxSharedBytes) && needs[3] == targetName) {
          EXPECT_GT(std::stol(needs[1]), target.maxSharedBytes) << where;
          const codegen::TargetInfo roomier = *codegen::findTarget("sm_90");
          ASSERT_GT(roomier.maxSharedBytes, target.maxSharedBytes) << where;
          Expected<codegen::CompiledKernel> there = unrequested(roomier, codegen::Emit::Mlir);
          EXPECT_TRUE(there.isOk()) << where << ", on sm_90 without MINPROGS: " << there.status().message();
          ++refused;
          continue;
        }
        // MINPROGS = n where n programs' shared memory cannot share one SM (CU) of the target is
        // refused with the bytes; the same schedule, its residency left to the compiler, must
        // then compile there, and the shared memory its code object allocates (ptxas's or the
        // HSACO's figure, not the emitter's) must indeed not fit n times.
        std::smatch residency;
        if (!c.isOk() && std::regex_search(c.status().message(), residency, kResidencyRefusal) &&
            residency[4] == targetName) {
          const int64_t programs = std::stol(residency[1]), bytes = std::stol(residency[2]);
          EXPECT_EQ(programs, k->configValue("MINPROGS", 0)) << where;
          EXPECT_GT(programs * (bytes + target.sharedBytesReservedPerProgram), target.sharedBytesPerUnit) << where;
          Expected<codegen::CompiledKernel> there = unrequested(target, emit);
          ASSERT_TRUE(there.isOk()) << where << ", without MINPROGS: " << there.status().message();
          if (std::optional<int> allocated = there->resources.sharedBytes)
            EXPECT_GT(programs * (*allocated + target.sharedBytesReservedPerProgram), target.sharedBytesPerUnit)
                << where << ": the object allocates " << *allocated << " bytes";
          ++refused;
          continue;
        }
        ASSERT_TRUE(c.isOk()) << where << ": " << c.status().message();
        EXPECT_FALSE(c->bytes.empty()) << where;
        ++compiled;
      }
    }
  }
  std::printf("%s: %d code objects, %d configurations refused for the target\n", GetParam().c_str(), compiled,
              refused);
}

INSTANTIATE_TEST_SUITE_P(Kernels, AllConfigs, ::testing::ValuesIn(testing::kernelFiles()), [](const auto& info) {
  std::string name = std::filesystem::path(info.param).stem().string();
  for (char& c : name)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
});

}  // namespace
}  // namespace mxfp6

// The op table against the DSL: every kernel a plan launches exists, every default plan's
// configs instantiate at every size and variant, candidate enumeration and plan JSON, the plans a
// set of compiled configs makes and what their launch metadata may say.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>

#include "compiler/frontend/frontend.h"
#include "ops/op_table.h"
#include "ops/plan.h"

namespace mxfp6::ops {
namespace {

/// The parsed .mxk file, cached.
const frontend::Module* load(const std::string& file) {
  static std::map<std::string, std::unique_ptr<frontend::Module>> cache;
  auto& slot = cache[file];
  if (!slot) {
    frontend::DiagnosticEngine diags;
    auto m = frontend::parseFile(std::string(MXFP6_DSL_DIR) + "/" + file, diags);
    if (!m) return nullptr;
    slot = std::make_unique<frontend::Module>(std::move(*m));
  }
  return slot.get();
}

std::map<std::string, std::string> defaults(const OpSpec& op) { return *resolveVariant(op, {}); }

/// The op's variants to try: the defaults, then each axis's values one at a time.
std::vector<std::map<std::string, std::string>> someVariants(const OpSpec& op) {
  std::vector<std::map<std::string, std::string>> variants = {defaults(op)};
  for (const VariantAxis& axis : op.variants)
    for (const std::string& value : axis.values) {
      auto v = defaults(op);
      v[axis.name] = value;
      variants.push_back(v);
    }
  return variants;
}

TEST(OpTable, EveryDefaultPlanInstantiatesAtEveryVariantAndSize) {
  for (const OpSpec& op : opTable()) {
    frontend::DiagnosticEngine diags;
    std::vector<int64_t> sizes = op.sizeValues.empty() ? std::vector<int64_t>{0} : op.sizeValues;
    std::vector<std::map<std::string, std::string>> variants = someVariants(op);
    for (int64_t size : sizes)
      for (const auto& variant : variants) {
        Plan plan = defaultPlan(op, variant, size);
        for (const PlanLaunch& launch : plan.launches) {
          std::string error;
          auto config = frontend::parseConfigString(launch.config, error);
          ASSERT_TRUE(config) << launch.config << ": " << error;
          auto module = load(kernelFile(op, launch.kernel));
          ASSERT_TRUE(module) << launch.kernel;
          auto k = frontend::instantiate(*module, launch.kernel, *config, diags);
          EXPECT_TRUE(k && !diags.hasErrors()) << op.name << " " << plan.id() << ": " << diags.render();
          diags.clear();
        }
      }
  }
}

TEST(OpTable, EveryCandidateConfigNamesOnlyKnobsTheKernelDeclares) {
  // A candidate may be refused at some sizes (a tile that does not divide C), never because it
  // names a knob or value the kernel lacks: at each op's first size some config of every role
  // instantiates and every refusal is a constraint, not an unknown key.
  for (const OpSpec& op : opTable()) {
    frontend::DiagnosticEngine diags;
    int64_t size = op.sizeValues.empty() ? 0 : op.sizeValues.front();
    for (const Plan& plan : candidatePlans(op, defaults(op), size))
      for (const PlanLaunch& launch : plan.launches) {
        std::string error;
        auto config = frontend::parseConfigString(launch.config, error);
        ASSERT_TRUE(config) << error;
        frontend::instantiate(*load(kernelFile(op, launch.kernel)), launch.kernel, *config, diags);
        EXPECT_EQ(diags.render().find("unknown"), std::string::npos) << plan.id() << ": " << diags.render();
        diags.clear();
      }
  }
}

TEST(OpTable, CandidatesAreTheCrossProductWithTheDefaultFirst) {
  const OpSpec* op = findOp("ln_modulate_bwd");
  ASSERT_NE(op, nullptr);
  auto plans = candidatePlans(*op, defaults(*op), 3072);
  const FamilySpec& f = op->families[0];
  EXPECT_EQ(plans.size(), f.roles[0].configs.size() * f.roles[1].configs.size() * f.partialChoices.size());
  std::set<std::string> ids;
  for (const Plan& p : plans) EXPECT_TRUE(ids.insert(p.id()).second) << "duplicate " << p.id();
  EXPECT_EQ(plans.front().partials, f.partialChoices.front());
  EXPECT_NE(plans.front().launches[0].config.find(f.roles[0].configs.front().substr(0, 7)), std::string::npos);
  EXPECT_NE(plans.front().launches[0].config.find("D=3072"), std::string::npos);
}

TEST(OpTable, SharedHelpersTakeNoVariantOrSize) {
  const OpSpec* op = findOp("norm_rope_qkv_bwd_pack");
  ASSERT_NE(op, nullptr);
  Plan plan = defaultPlan(*op, {{"FMT", "E2M3"}, {"MODE", "EVEN"}}, 0);
  ASSERT_EQ(plan.launches.size(), 3u);
  EXPECT_NE(plan.launches[0].config.find("FMT=E2M3"), std::string::npos);
  EXPECT_EQ(plan.launches[1].config.find("FMT"), std::string::npos);
  EXPECT_EQ(plan.launches[2].config.find("MODE"), std::string::npos);
}

/// Per kernel, the distinct launch configs of `plans`, in the order they first appear.
std::map<std::string, std::vector<std::string>> configsOf(const std::vector<Plan>& plans) {
  std::map<std::string, std::vector<std::string>> out;
  for (const Plan& plan : plans)
    for (const PlanLaunch& l : plan.launches)
      if (std::find(out[l.kernel].begin(), out[l.kernel].end(), l.config) == out[l.kernel].end())
        out[l.kernel].push_back(l.config);
  return out;
}

std::vector<std::string> idsOf(const std::vector<Plan>& plans) {
  std::vector<std::string> ids;
  for (const Plan& p : plans) ids.push_back(p.id());
  return ids;
}

/// The kernel a launch config instantiates, as the compiler binds it (what its launch metadata's
/// "config" and "tunables" say); nullopt where the config is refused at this size.
std::optional<kir::Kernel> compiled(const OpSpec& op, const PlanLaunch& launch) {
  frontend::DiagnosticEngine diags;
  std::string error;
  auto config = frontend::parseConfigString(launch.config, error);
  if (!config) return std::nullopt;
  auto k = frontend::instantiate(*load(kernelFile(op, launch.kernel)), launch.kernel, *config, diags);
  if (!k || diags.hasErrors()) return std::nullopt;
  return k;
}

/// "K=V,..." of a compiled kernel's config: the launch metadata's spelling (defaults included,
/// variants by code).
std::string metadataSpelling(const kir::Kernel& k) {
  std::string out;
  for (const auto& [key, value] : k.config) out += (out.empty() ? "" : ",") + key + "=" + std::to_string(value);
  return out;
}

TEST(PlansOfConfigs, TheTablesCompiledCandidatesMakeTheCandidatePlans) {
  for (const OpSpec& op : opTable()) {
    std::vector<int64_t> sizes = op.sizeValues.empty() ? std::vector<int64_t>{0} : op.sizeValues;
    for (int64_t size : sizes)
      for (const auto& variant : someVariants(op)) {
        std::vector<Plan> candidates = candidatePlans(op, variant, size);
        // Given in reverse: the table decides the order, not the caller.
        auto configs = configsOf(candidates);
        for (auto& [kernel, list] : configs) std::reverse(list.begin(), list.end());
        auto plans = plansOfConfigs(op, variant, size, configs);
        ASSERT_TRUE(plans) << plans.status().message();
        EXPECT_EQ(idsOf(*plans), idsOf(candidates)) << op.name << " at " << size;
        ASSERT_EQ(plans->size(), candidates.size());
        for (size_t i = 0; i < plans->size(); ++i) EXPECT_EQ(planToJson((*plans)[i]), planToJson(candidates[i]));
      }
  }
}

TEST(PlansOfConfigs, LaunchMetadataSpellingMakesTheSamePlansInTheTablesOrder) {
  // The objects' launch metadata spell a config with every tunable (defaults included) and the
  // variants by code: the same plans, each launch's config as given, the default first.
  for (const char* name : {"ln_modulate_bwd", "mxfp6_pack_dual", "norm_rope_qkv_bwd_pack"}) {
    const OpSpec& op = *findOp(name);
    int64_t size = op.sizeValues.empty() ? 0 : op.sizeValues.front();
    auto variant = defaults(op);
    if (op.variants.front().name == "FMT") variant["FMT"] = "E2M3";
    std::vector<Plan> expected;
    std::map<std::string, std::vector<std::string>> configs;
    for (Plan plan : candidatePlans(op, variant, size)) {
      bool every = true;
      for (PlanLaunch& l : plan.launches) {
        auto k = compiled(op, l);
        if (!k) {
          every = false;  // refused at this size, as precompile prunes it
          break;
        }
        l.config = metadataSpelling(*k);
        auto& list = configs[l.kernel];
        if (std::find(list.begin(), list.end(), l.config) == list.end()) list.insert(list.begin(), l.config);
      }
      if (every) expected.push_back(plan);
    }
    ASSERT_FALSE(expected.empty()) << name;
    auto plans = plansOfConfigs(op, variant, size, configs);
    ASSERT_TRUE(plans) << plans.status().message();
    EXPECT_EQ(idsOf(*plans), idsOf(expected)) << name;
  }
}

TEST(PlansOfConfigs, ObjectsOfAnotherVariantOrSizeAreOtherCode) {
  const OpSpec& op = *findOp("mxfp6_pack_rows");
  std::map<std::string, std::string> variant = {{"FMT", "E3M2"}, {"MODE", "RCEIL"}};
  auto plans = plansOfConfigs(op, variant, 3072,
                              {{"mxfp6_pack_rows",
                                {"C=3072,FMT=E3M2,MODE=RCEIL,ROWS=4,THREADS=32,VEC=32",      // the table's third
                                 "C=3072,FMT=0,MODE=0,ROWS=1,STAGE=1,THREADS=192,VEC=16",    // E2M3
                                 "C=9216,FMT=1,MODE=0,ROWS=1,STAGE=1,THREADS=192,VEC=16",    // another C
                                 "FMT=1,MODE=0,ROWS=1,STAGE=1,THREADS=192,VEC=16",           // no C
                                 "VEC=16,C=3072,FMT=1,MODE=0,ROWS=1,STAGE=1,THREADS=192",    // the default
                                 "C=3072,FMT=1,MODE=0,ROWS=1,STAGE=2,THREADS=96,VEC=32"}},    // not the table's
                               {"mxfp6_pack_cols", {"C=3072,FMT=1,MODE=0,HB=4,ROWS=1,THREADS=256,VEC=32,W=64"}}});
  ASSERT_TRUE(plans) << plans.status().message();
  EXPECT_EQ(idsOf(*plans), (std::vector<std::string>{
                               "rows: mxfp6_pack_rows[C=3072,FMT=1,MODE=0,ROWS=1,STAGE=1,THREADS=192,VEC=16]",
                               "rows: mxfp6_pack_rows[C=3072,FMT=E3M2,MODE=RCEIL,ROWS=4,THREADS=32,VEC=32]",
                               "rows: mxfp6_pack_rows[C=3072,FMT=1,MODE=0,ROWS=1,STAGE=2,THREADS=96,VEC=32]"}));
}

TEST(PlansOfConfigs, EveryRoleNeedsObjectsAndPartialChoicesAreCrossed) {
  const OpSpec& qkv = *findOp("norm_rope_qkv_bwd");
  auto variant = defaults(qkv);
  auto none = plansOfConfigs(qkv, variant, 0, {{"norm_rope_qkv_bwd", {"ROWS=16,THREADS=16,VEC=8"}}});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  auto tiles = plansOfConfigs(qkv, variant, 0,
                              {{"norm_rope_qkv_bwd_tiles", {"THREADS=256,VEC=8"}},
                               {"norm_rope_dw_reduce", {"THREADS=16,VEC=4", "THREADS=32,VEC=4"}}});
  ASSERT_TRUE(tiles);
  std::string pass = "tiles: norm_rope_qkv_bwd_tiles[THREADS=256,VEC=8]";
  EXPECT_EQ(idsOf(*tiles), (std::vector<std::string>{pass + " + norm_rope_dw_reduce[THREADS=32,VEC=4]",
                                                     pass + " + norm_rope_dw_reduce[THREADS=16,VEC=4]"}));
  const OpSpec& ln = *findOp("ln_modulate_bwd");
  auto plans = plansOfConfigs(ln, defaults(ln), 3072,
                              {{"ln_modulate_bwd", {"D=3072,THREADS=384,VEC=8"}},
                               {"ln_modulate_bwd_reduce", {"D=3072,THREADS=192,VEC=4,W=768"}}});
  ASSERT_TRUE(plans);
  ASSERT_EQ(plans->size(), ln.families[0].partialChoices.size());
  for (size_t i = 0; i < plans->size(); ++i) EXPECT_EQ((*plans)[i].partials, ln.families[0].partialChoices[i]);
}

TEST(PlansOfConfigs, AMalformedConfigIsNamed) {
  const OpSpec& ln = *findOp("ln_modulate_bwd");
  auto plans = plansOfConfigs(ln, defaults(ln), 3072, {{"ln_modulate_bwd_reduce", {"D=3072,THREADS"}}});
  ASSERT_FALSE(plans);
  EXPECT_NE(plans.status().message().find("ln_modulate_bwd_reduce config 'D=3072,THREADS'"), std::string::npos)
      << plans.status().message();
}

TEST(CompiledConfig, VariantCodesAreTheCompilers) {
  // What the op table says a code object's metadata reports for a variant is what the compiler
  // binds it to.
  for (const OpSpec& op : opTable()) {
    int64_t size = op.sizeValues.empty() ? 0 : op.sizeValues.front();
    for (const VariantAxis& axis : op.variants) {
      if (!axis.compileTime) continue;
      ASSERT_EQ(axis.codes.size(), axis.values.size()) << op.name << " " << axis.name;
      for (size_t i = 0; i < axis.values.size(); ++i) {
        auto variant = defaults(op);
        variant[axis.name] = axis.values[i];
        auto k = compiled(op, defaultPlan(op, variant, size).launches[0]);
        ASSERT_TRUE(k) << op.name;
        EXPECT_EQ(k->config.at(axis.name), axis.codes[i]) << op.name << " " << axis.name << "=" << axis.values[i];
      }
    }
  }
}

TEST(CompiledConfig, EveryCandidateIsWhatItsKernelIsCompiledWith) {
  for (const OpSpec& op : opTable()) {
    int64_t size = op.sizeValues.empty() ? 0 : op.sizeValues.front();
    int checked = 0;
    for (const auto& variant : someVariants(op))
      for (const Plan& plan : candidatePlans(op, variant, size))
        for (const PlanLaunch& l : plan.launches) {
          auto k = compiled(op, l);
          if (!k) continue;  // refused at this size
          Status same = checkCompiledConfig(op, l.config, k->config, k->tunables);
          EXPECT_TRUE(same) << l.kernel << "[" << l.config << "]: " << same.message();
          ++checked;
        }
    EXPECT_GT(checked, 0) << op.name;
  }
}

TEST(CompiledConfig, AnotherVariantSizeOrTunableIsNamed) {
  const OpSpec& op = *findOp("mxfp6_pack_rows");
  Plan plan = defaultPlan(op, {{"FMT", "E2M3"}, {"MODE", "FLOOR"}}, 3072);
  auto k = compiled(op, plan.launches[0]);
  ASSERT_TRUE(k);
  EXPECT_TRUE(checkCompiledConfig(op, plan.launches[0].config, k->config, k->tunables));
  EXPECT_TRUE(checkCompiledConfig(op, metadataSpelling(*k), k->config, k->tunables));
  Plan other = defaultPlan(op, {{"FMT", "E3M2"}, {"MODE", "FLOOR"}}, 3072);
  Status s = checkCompiledConfig(op, other.launches[0].config, k->config, k->tunables);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("FMT is 0, the launch's E3M2"), std::string::npos) << s.message();
  s = checkCompiledConfig(op, "FMT=E2M3,MODE=FLOOR,ROWS=1,THREADS=192,VEC=16", k->config, k->tunables);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("C=3072 is not a tunable"), std::string::npos) << s.message();
  s = checkCompiledConfig(op, plan.launches[0].config + ",MINPROGS=2", k->config, k->tunables);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("no MINPROGS"), std::string::npos) << s.message();
}

TEST(OpTable, TreeChunksMultiplyToThePartialsWithBoundedFanIn) {
  for (int64_t P : {1, 2, 8, 31, 32, 33, 96, 1024, 3072, 8192, 12288, 24576, 97 * 64}) {
    auto chunks = treeChunks(P);
    int64_t product = 1;
    for (size_t i = 0; i < chunks.size(); ++i) {
      product *= chunks[i];
      if (i + 1 < chunks.size()) {
        EXPECT_LE(chunks[i], 32) << P;
        EXPECT_GE(chunks[i], 4) << P;
      }
    }
    EXPECT_EQ(product, P);
  }
  EXPECT_EQ(treeChunks(8192), (std::vector<int64_t>{32, 32, 8}));
  EXPECT_EQ(treeChunks(12288), (std::vector<int64_t>{32, 32, 12}));
}

TEST(Plan, JsonRoundTripAndValidation) {
  const OpSpec* op = findOp("mxfp6_pack_dual");
  Plan plan = candidatePlans(*op, {{"FMT", "E3M2"}, {"MODE", "RCEIL"}}, 9216)[2];
  plan.launches[0].object = std::string(64, 'a');
  auto back = parsePlan(planToJson(plan));
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->id(), plan.id());
  EXPECT_EQ(back->launches[0].object, plan.launches[0].object);
  EXPECT_FALSE(parsePlan("{\"op\": \"nope\", \"family\": \"rows\", \"launches\": []}"));
  EXPECT_FALSE(parsePlan("not json"));
  std::string wrongKernel = planToJson(plan);
  wrongKernel.replace(wrongKernel.find("mxfp6_pack_dual"), 15, "mxfp6_pack_rows");
  auto bad = parsePlan(wrongKernel);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("declares"), std::string::npos) << bad.status().message();
}

TEST(Problem, BadShapesNameTheField) {
  const OpSpec* pack = findOp("mxfp6_pack_rows");
  Problem p{pack, *resolveVariant(*pack, {}), 4096, 1024};
  auto s = validateProblem(p);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("C must be one of"), std::string::npos) << s.message();
  auto v = resolveVariant(*pack, {{"FMT", "E4M3"}});
  ASSERT_FALSE(v);
  EXPECT_NE(v.status().message().find("FMT must be one of E3M2, E2M3, got E4M3"), std::string::npos);
  const OpSpec* ln = findOp("ln_modulate_fwd");
  Problem q{ln, *resolveVariant(*ln, {}), 3072, 1000, 1, 512};
  EXPECT_FALSE(validateProblem(q));
  q.tokens = 1024;
  EXPECT_TRUE(validateProblem(q));
  q.tokens = int64_t{1} << 40;
  q.tokensPerSample = 1024;
  EXPECT_FALSE(validateProblem(q));
}

}  // namespace
}  // namespace mxfp6::ops

namespace mxfp6::ops {
namespace {

TEST(OpTable, EditingAKernelFileReKeysExactlyTheOpsThatLaunchIt) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("mxfp6_dsl_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(MXFP6_DSL_DIR, dir);
  std::map<std::string, std::string> before;
  for (const OpSpec& op : opTable()) {
    auto t = keyToolchain("mxfp6c X", op, dir.string());
    ASSERT_TRUE(t) << t.status().message();
    EXPECT_EQ(compilerOfToolchain(*t), "mxfp6c X");
    before[op.name] = *t;
  }
  { std::ofstream(dir / "ln_modulate.mxk", std::ios::app) << "\n# an edit\n"; }
  for (const OpSpec& op : opTable()) {
    auto t = keyToolchain("mxfp6c X", op, dir.string());
    ASSERT_TRUE(t);
    EXPECT_EQ(*t != before[op.name], op.file == "ln_modulate.mxk") << op.name;
  }
  // The shared dw reduction lives in norm_rope.mxk: the prologue (norm_rope_bwd_pack.mxk) is
  // re-keyed by an edit there too.
  { std::ofstream(dir / "norm_rope.mxk", std::ios::app) << "\n# an edit\n"; }
  EXPECT_NE(*keyToolchain("mxfp6c X", *findOp("norm_rope_qkv_bwd_pack"), dir.string()), before["norm_rope_qkv_bwd_pack"]);
  EXPECT_EQ(*keyToolchain("mxfp6c X", *findOp("mxfp6_pack_rows"), dir.string()), before["mxfp6_pack_rows"]);
  fs::remove(dir / "mxfp6_pack.mxk");
  EXPECT_FALSE(keyToolchain("mxfp6c X", *findOp("mxfp6_pack_rows"), dir.string()));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mxfp6::ops

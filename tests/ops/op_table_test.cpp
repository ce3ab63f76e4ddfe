// The op table against the DSL: every kernel a plan launches exists, every default plan's
// configs instantiate at every size and variant, candidate enumeration and plan JSON.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
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

TEST(OpTable, EveryDefaultPlanInstantiatesAtEveryVariantAndSize) {
  for (const OpSpec& op : opTable()) {
    frontend::DiagnosticEngine diags;
    std::vector<int64_t> sizes = op.sizeValues.empty() ? std::vector<int64_t>{0} : op.sizeValues;
    std::vector<std::map<std::string, std::string>> variants = {defaults(op)};
    for (const VariantAxis& axis : op.variants)
      for (const std::string& value : axis.values) {
        auto v = defaults(op);
        v[axis.name] = value;
        variants.push_back(v);
      }
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

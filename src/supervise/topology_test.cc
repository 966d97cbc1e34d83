#include "supervise/topology.h"

#include <gtest/gtest.h>

#include <map>

namespace gpuhost::supervise {
namespace {

using Env = std::map<std::string, std::string, std::less<>>;

Topology detect(const std::vector<std::string>& command, const Env& env = {}) {
  auto t = detect_topology(command, [&](std::string_view name) -> std::optional<std::string> {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
  EXPECT_TRUE(t) << t.error().message;
  return t.value_or(Topology{});
}

TEST(Topology, APlainCommandIsOneNode) {
  Topology t = detect({"python", "train.py", "--nnodes=4"});  // the trainer's own flag, not torchrun's
  EXPECT_EQ(t.engine, "");
  EXPECT_FALSE(t.multi_node());
  EXPECT_EQ(t.restart_owner(), "");
  EXPECT_EQ(t.describe(), "single node");
}

TEST(Topology, ReadsTorchrunFlagsInEitherSpelling) {
  Topology t = detect({"torchrun", "-r", "9:1", "--nnodes=2", "--node_rank", "1", "--master-addr=10.0.0.5",
                       "--master_port", "29511", "--nproc-per-node=8", "train.py", "--node_rank=7"});
  EXPECT_EQ(t.engine, "torchrun");
  EXPECT_TRUE(t.torchrun);
  EXPECT_EQ(t.nnodes, 2);
  EXPECT_EQ(t.node_rank, 1);  // torchrun's, not the script's --node_rank=7
  EXPECT_EQ(t.leader_host, "10.0.0.5");
  EXPECT_EQ(t.leader_port, 29511);
  EXPECT_EQ(t.rdzv_backend, "static");
  EXPECT_EQ(t.nproc_per_node, 8);
  EXPECT_EQ(t.describe(), "node 1 of 2 (torchrun, static at 10.0.0.5:29511)");
  EXPECT_EQ(t.restart_owner(), "whoever starts the nodes (rerun every node's gpuhost)");
}

TEST(Topology, ReadsC10dRendezvousAndElasticRanges) {
  Topology t = detect({"python3", "-u", "-m", "torch.distributed.run", "--nnodes", "1:4", "--rdzv-backend=c10d",
                       "--rdzv_endpoint=[fd00::1]:29411", "--max-restarts=3", "train.py"});
  EXPECT_EQ(t.nnodes, 1);
  EXPECT_EQ(t.nnodes_max, 4);
  EXPECT_TRUE(t.multi_node());
  EXPECT_FALSE(t.node_rank);  // c10d assigns ranks at rendezvous
  EXPECT_EQ(t.leader_host, "fd00::1");
  EXPECT_EQ(t.leader_port, 29411);
  EXPECT_EQ(t.restart_owner(), "torchrun --max-restarts=3");
  Topology plain_port = detect({"torchrun", "--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=head", "x.py"});
  EXPECT_EQ(plain_port.leader_port, 29400);  // torchrun's rendezvous default
}

TEST(Topology, TorchrunFlagsMayComeFromPetVariables) {
  Topology t = detect({"torchrun", "train.py"}, {{"PET_NNODES", "2"}, {"PET_NODE_RANK", "1"}, {"PET_MASTER_ADDR", "head"}});
  EXPECT_EQ(t.nnodes, 2);
  EXPECT_EQ(t.node_rank, 1);
  EXPECT_EQ(t.leader_host, "head");
  EXPECT_NE(std::find(t.evidence.begin(), t.evidence.end(), "PET_NNODES=2"), t.evidence.end());
}

TEST(Topology, StandaloneIsOneNodeWhateverElseIsSaid) {
  Topology t = detect({"torchrun", "--standalone", "--nnodes=2", "--nproc-per-node=2", "train.py"});
  EXPECT_FALSE(t.multi_node());
}

TEST(Topology, ReadsASlurmStep) {
  const Env env = {{"SLURM_JOB_ID", "4242"},        {"SLURM_STEP_ID", "0"},
                   {"SLURM_STEP_NUM_NODES", "2"},   {"SLURM_STEP_NODELIST", "n[1-2]"},
                   {"SLURM_JOB_NUM_NODES", "2"},    {"SLURM_NODEID", "1"},
                   {"SLURM_RESTART_COUNT", "1"}};
  Topology t = detect({"python", "train.py"}, env);
  EXPECT_EQ(t.engine, "slurm");
  EXPECT_EQ(t.job_key, "4242");
  EXPECT_EQ(t.nnodes, 2);
  EXPECT_EQ(t.node_rank, 1);
  EXPECT_EQ(t.slurm_nodes, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(t.leader_host, "n1");
  EXPECT_EQ(t.engine_restarts, 1);
  EXPECT_EQ(t.restart_owner(), "slurm (sbatch --requeue)");
  EXPECT_EQ(t.describe(), "node 1 of 2 (slurm, leader n1)");

  // torchrun under srun: torchrun's own flags win; Slurm supplies the job and the restarts.
  Topology both = detect({"torchrun", "--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=n1:29400", "t.py"}, env);
  EXPECT_EQ(both.engine, "slurm");
  EXPECT_TRUE(both.torchrun);
  EXPECT_EQ(both.node_rank, 1);  // from SLURM_NODEID: c10d gave none
  EXPECT_EQ(both.describe(), "node 1 of 2 (slurm, torchrun, c10d at n1:29400)");
}

TEST(Topology, ASlurmArrayElementIsRequeuedByItsOwnId) {
  Topology t = detect({"python", "train.py"},
                      {{"SLURM_JOB_ID", "101"}, {"SLURM_ARRAY_JOB_ID", "100"}, {"SLURM_ARRAY_TASK_ID", "3"}});
  EXPECT_EQ(t.job_key, "100_3");
  EXPECT_FALSE(t.multi_node());
}

TEST(Topology, TheBatchScriptOfAMultiNodeAllocationIsOneNode) {
  Topology t = detect({"python", "train.py"}, {{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NUM_NODES", "2"}, {"SLURM_NODEID", "0"}});
  EXPECT_FALSE(t.multi_node());
  EXPECT_NE(t.evidence.back().find("one gpuhost per node needs srun"), std::string::npos);
}

TEST(Topology, ReadsKubernetesAndSkypilot) {
  Topology k = detect({"torchrun", "--nnodes=3", "--rdzv-backend=c10d", "--rdzv-endpoint=train-0.train:29400", "t.py"},
                      {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"JOB_COMPLETION_INDEX", "2"}, {"JOBSET_NAME", "llm"}});
  EXPECT_EQ(k.engine, "kubernetes");
  EXPECT_EQ(k.node_rank, 2);
  EXPECT_EQ(k.job_key, "llm");
  EXPECT_EQ(k.restart_owner(), "kubernetes (the Job's or JobSet's restart policy)");

  Topology s = detect({"python", "train.py"}, {{"SKYPILOT_NODE_RANK", "1"}, {"SKYPILOT_NUM_NODES", "2"},
                                                {"SKYPILOT_NODE_IPS", "10.1.0.4\n10.1.0.5\n"}, {"SKYPILOT_TASK_ID", "sky-1"}});
  EXPECT_EQ(s.engine, "skypilot");
  EXPECT_EQ(s.nnodes, 2);
  EXPECT_EQ(s.node_rank, 1);
  EXPECT_EQ(s.leader_host, "10.1.0.4");
  EXPECT_EQ(s.job_key, "sky-1");
}

TEST(Topology, ContradictionsAndNonNumbersAreErrorsNamingTheirSource) {
  auto env = [](std::string_view) { return std::optional<std::string>(); };
  auto rank = detect_topology({"torchrun", "--nnodes=2", "--node-rank=2", "t.py"}, env);
  ASSERT_FALSE(rank);
  EXPECT_NE(rank.error().message.find("node rank 2 is not below the 2 nodes of the job (torchrun --nnodes=2, torchrun --node-rank=2)"),
            std::string::npos)
      << rank.error().message;
  auto word = detect_topology({"torchrun", "--nnodes=two", "t.py"}, env);
  ASSERT_FALSE(word);
  EXPECT_NE(word.error().message.find("torchrun --nnodes=two: 'two' is not a non-negative whole number"), std::string::npos)
      << word.error().message;
  auto range = detect_topology({"torchrun", "--nnodes=4:2", "t.py"}, env);
  ASSERT_FALSE(range);
}

TEST(Topology, ExpandsSlurmHostLists) {
  auto hosts = expand_slurm_hostlist("gpu[01-03,07],login1,rack[1-2]-n[8-9]");
  ASSERT_TRUE(hosts) << hosts.error().message;
  EXPECT_EQ(*hosts, (std::vector<std::string>{"gpu01", "gpu02", "gpu03", "gpu07", "login1", "rack1-n8", "rack1-n9",
                                              "rack2-n8", "rack2-n9"}));
  EXPECT_FALSE(expand_slurm_hostlist("gpu[01-03"));
  EXPECT_FALSE(expand_slurm_hostlist("gpu[3-1]"));
  EXPECT_FALSE(expand_slurm_hostlist("gpu]"));
}

TEST(Topology, NativeWindowsRefusesMultiNodeWithTheWayOut) {
  Topology one;
  EXPECT_TRUE(check_topology_supported(one));
  Topology two;
  two.nnodes = two.nnodes_max = 2;
  auto supported = check_topology_supported(two);
#ifdef _WIN32
  ASSERT_FALSE(supported);
  EXPECT_EQ(supported.error().code, ErrorCode::unsupported);
  EXPECT_NE(supported.error().message.find("run multi-node jobs on Linux or under WSL2"), std::string::npos);
#else
  EXPECT_TRUE(supported);
#endif
}

}  // namespace
}  // namespace gpuhost::supervise

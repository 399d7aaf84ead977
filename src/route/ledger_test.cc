// The ledger on both databases: SQLite in a temp file, and a real PostgreSQL
// that CTest starts (scripts/pg-cluster.sh, fixture "pg"). Without that
// server the PostgreSQL cases fail and say why; they are never skipped.
#include "route/ledger.h"
#include "route/ledger_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "testing/test_env.h"

namespace hone::route {
namespace {

std::string Unique(const std::string& prefix) {
  static std::atomic<int> n{0};
  return prefix + "-" + std::to_string(std::random_device{}()) + "-" + std::to_string(++n);
}

Result<std::unique_ptr<SqlConn>> Connect(const std::string& kind, const std::string& sqlite_path = "") {
  if (kind == "sqlite") return OpenSqlite(sqlite_path.empty() ? hone::testing::TempPath(Unique("ledger") + ".db") : sqlite_path);
  std::string url;
  if (const char* env = std::getenv("HONE_TEST_PG_URL")) url = env;
  if (url.empty()) {
    std::ifstream in(hone::testing::TempPath("pg.url"));
    std::getline(in, url);
  }
  if (url.empty())
    return MakeError(ErrorCode::kUnavailable,
                     "no PostgreSQL for this test: CTest's pg_cluster_start (scripts/pg-cluster.sh) did not "
                     "write " + hone::testing::TempPath("pg.url") + " and HONE_TEST_PG_URL is unset");
  return OpenPostgres(url);
}

class LedgerTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Ledger> Open(const std::string& sqlite_path = "") {
    auto c = Connect(GetParam(), sqlite_path);
    if (!c) {
      ADD_FAILURE() << c.error().ToString();
      return nullptr;
    }
    auto l = Ledger::Open(std::move(*c));
    if (!l) {
      ADD_FAILURE() << l.error().ToString();
      return nullptr;
    }
    return std::move(*l);
  }
  static LedgerEntry Entry(const std::string& id, int64_t cost) {
    LedgerEntry e;
    e.id = id;
    e.time = 1764547200;  // 2025-12-01
    e.day = "2025-12-01";
    e.month = "2025-12";
    e.route = "support";
    e.upstream = "cloud";
    e.model = "m";
    e.prompt_tokens = 10;
    e.completion_tokens = 20;
    e.cost = cost;
    e.outcome = "ok";
    return e;
  }
  static int64_t Spent(Ledger& l, const std::string& budget, const std::string& period, int64_t* reserved) {
    auto u = l.Usage({period});
    EXPECT_TRUE(u.ok());
    for (const BudgetUsage& x : *u)
      if (x.budget == budget) {
        if (reserved) *reserved = x.reserved;
        return x.spent;
      }
    if (reserved) *reserved = 0;
    return 0;
  }
};

// Four connections (as four router replicas would hold), sixteen threads on
// each, one cap that fits ten.
TEST_P(LedgerTest, ConcurrentReservationsNeverPassTheCap) {
  const std::string file = hone::testing::TempPath(Unique("shared") + ".db");
  std::vector<std::unique_ptr<Ledger>> replicas;
  for (int i = 0; i < 4; ++i) {
    replicas.push_back(Open(file));
    ASSERT_TRUE(replicas.back());
  }
  Ledger* l = replicas[0].get();
  const std::string budget = Unique("cap");
  const int64_t amount = 1000;
  std::vector<BudgetPeriod> parts = {{budget, "M:2025-12", 10 * amount + 999}};
  std::atomic<int> admitted{0}, refused{0}, failed{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 64; ++i)
    threads.emplace_back([&, i] {
      BudgetPeriod why;
      Status s = replicas[i % 4]->Reserve(budget + "-" + std::to_string(i), amount, parts, 4e9, &why);
      if (s)
        ++admitted;
      else if (s.error().code == ErrorCode::kRateLimited && why.budget == budget)
        ++refused;
      else
        ++failed, ADD_FAILURE() << s.error().ToString();
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 10);
  EXPECT_EQ(refused.load(), 54);
  EXPECT_EQ(failed.load(), 0);
  int64_t reserved = 0;
  EXPECT_EQ(Spent(*l, budget, "M:2025-12", &reserved), 0);
  EXPECT_EQ(reserved, 10 * amount);
}

TEST_P(LedgerTest, SettleWritesOneRowReleasesTheHoldAndIsIdempotent) {
  auto l = Open();
  ASSERT_TRUE(l);
  const std::string budget = Unique("settle");
  const std::string id = Unique("req");
  std::vector<BudgetPeriod> parts = {{budget, "M:2025-12", 1000000}, {budget, "D:2025-12-01", 500000}};
  ASSERT_TRUE(l->Reserve(id, 5000, parts, 4e9).ok());
  std::vector<int64_t> after;
  auto first = l->Settle(Entry(id, 1234), parts, &after);
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  EXPECT_TRUE(*first);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0], 1234);
  auto second = l->Settle(Entry(id, 1234), parts, &after);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second) << "a second settle of the same id must change nothing";
  int64_t reserved = -1;
  EXPECT_EQ(Spent(*l, budget, "M:2025-12", &reserved), 1234);
  EXPECT_EQ(reserved, 0);
  EXPECT_EQ(Spent(*l, budget, "D:2025-12-01", &reserved), 1234);
  EXPECT_EQ(reserved, 0);
  auto entries = l->Entries("2025-12");
  ASSERT_TRUE(entries.ok());
  int rows = 0;
  for (const LedgerEntry& e : *entries) rows += e.id == id;
  EXPECT_EQ(rows, 1);
}

TEST_P(LedgerTest, AReservationIsAllOrNothingOverItsPeriods) {
  auto l = Open();
  ASSERT_TRUE(l);
  const std::string a = Unique("a"), b = Unique("b");
  ASSERT_TRUE(l->Reserve(Unique("r"), 900, {{b, "M:2025-12", 1000}}, 4e9).ok());
  BudgetPeriod why;
  Status s = l->Reserve(Unique("r"), 200, {{a, "M:2025-12", 1000}, {b, "M:2025-12", 1000}}, 4e9, &why);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kRateLimited);
  EXPECT_EQ(why.budget, b);
  int64_t reserved = -1;
  Spent(*l, a, "M:2025-12", &reserved);
  EXPECT_EQ(reserved, 0) << "the period that had room must not keep a part of a refused reservation";
}

TEST_P(LedgerTest, ReleaseAndExpiryGiveTheHoldBack) {
  auto l = Open();
  ASSERT_TRUE(l);
  const std::string budget = Unique("rel");
  const std::string kept = Unique("r"), dead = Unique("r");
  ASSERT_TRUE(l->Reserve(kept, 300, {{budget, "M:2025-12", 1000}}, 4e9).ok());
  ASSERT_TRUE(l->Reserve(dead, 400, {{budget, "M:2025-12", 1000}}, 1000).ok());  // expired long ago
  int64_t reserved = 0;
  Spent(*l, budget, "M:2025-12", &reserved);
  EXPECT_EQ(reserved, 700);
  auto freed = l->ExpireReservations(2e9);
  ASSERT_TRUE(freed.ok());
  EXPECT_GE(*freed, 1);
  Spent(*l, budget, "M:2025-12", &reserved);
  EXPECT_EQ(reserved, 300);
  ASSERT_TRUE(l->Release(kept).ok());
  Spent(*l, budget, "M:2025-12", &reserved);
  EXPECT_EQ(reserved, 0);
  // A renewed reservation (its request still runs) outlives its first expiry.
  const std::string live = Unique("r");
  ASSERT_TRUE(l->Reserve(live, 100, {{budget, "M:2025-12", 1000}}, 1000).ok());
  ASSERT_TRUE(l->Renew({live}, 4e9).ok());
  ASSERT_TRUE(l->ExpireReservations(2e9).ok());
  Spent(*l, budget, "M:2025-12", &reserved);
  EXPECT_EQ(reserved, 100);
}

TEST_P(LedgerTest, AnAlertFiresOncePerThresholdAndPeriod) {
  auto l = Open();
  ASSERT_TRUE(l);
  const std::string budget = Unique("alert");
  auto first = l->MarkAlert(budget, "M:2025-12", 800, 1);
  auto again = l->MarkAlert(budget, "M:2025-12", 800, 2);
  auto next_month = l->MarkAlert(budget, "M:2026-01", 800, 3);
  ASSERT_TRUE(first.ok() && again.ok() && next_month.ok());
  EXPECT_TRUE(*first);
  EXPECT_FALSE(*again);
  EXPECT_TRUE(*next_month);
}

// Rows go through the journal (one line each) into the ledger off the
// caller's thread; Flush waits for them, and the journal is then empty. What a
// killed process left is replayed once: a row already copied changes
// nothing, and a torn last line is skipped.
TEST_P(LedgerTest, TheJournalCarriesRowsInAndAKilledRunsLinesAreReplayedOnce) {
  auto l = Open();
  ASSERT_TRUE(l);
  const std::string journal = hone::testing::TempPath(Unique("journal"));
  const std::string pre = Unique("j") + "-";
  const std::vector<BudgetPeriod> parts = {{pre + "b", "M:2025-12", 0}};
  {
    auto w = LedgerWriter::Open(l.get(), journal);
    ASSERT_TRUE(w.ok()) << w.error().ToString();
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*w)->Append(Entry(pre + std::to_string(i), 100), parts).ok());
    ASSERT_TRUE((*w)->Flush());
    EXPECT_EQ(std::filesystem::file_size(journal), 0u);
  }
  auto spent = [&] {
    auto u = l->Usage({"M:2025-12"});
    EXPECT_TRUE(u.ok());
    for (const BudgetUsage& x : *u)
      if (x.budget == pre + "b") return x.spent;
    return int64_t{-1};
  };
  EXPECT_EQ(spent(), 300);
  // A killed run's journal: row 2 again (copied before the kill), row 3 new,
  // then a line cut off mid-write.
  {
    std::ofstream out(journal, std::ios::binary | std::ios::trunc);
    for (const std::string id : {pre + "2", pre + "3"})
      out << R"({"id":")" << id << R"(","time":1764547200,"day":"2025-12-01","month":"2025-12","tenant":"",)"
          << R"("route":"support","upstream":"cloud","model":"m","prompt_tokens":10,"cached_tokens":0,)"
          << R"("completion_tokens":20,"cost":100,"estimated":false,"outcome":"ok","parts":[[")" << pre
          << R"(b","M:2025-12"]]})" << "\n";
    out << R"({"id":")" << pre << R"(4","time":17645)";
  }
  // A reader beside a live owner settles the lines it finds but leaves the
  // journal, which the owner still appends to; the owner's copy is then a no-op.
  const auto journal_bytes = std::filesystem::file_size(journal);
  auto beside = LedgerWriter::Replay(*l, journal, LedgerWriter::ReplayAs::kBesideOwner);
  ASSERT_TRUE(beside.ok()) << beside.error().ToString();
  EXPECT_EQ(*beside, 2);
  EXPECT_EQ(spent(), 400);
  EXPECT_EQ(std::filesystem::file_size(journal), journal_bytes);
  auto replayed = LedgerWriter::Replay(*l, journal);
  ASSERT_TRUE(replayed.ok()) << replayed.error().ToString();
  EXPECT_EQ(*replayed, 2);  // the whole lines
  EXPECT_EQ(spent(), 400);  // row 2 once, row 3 added, the torn row 4 not
  EXPECT_EQ(std::filesystem::file_size(journal), 0u);
  auto again = LedgerWriter::Replay(*l, journal);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0);
  EXPECT_EQ(spent(), 400);
}

INSTANTIATE_TEST_SUITE_P(Databases, LedgerTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace hone::route

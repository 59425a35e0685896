#include "node/agent/agent_store.h"

#include "base/comma_list.h"
#include "base/error.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <set>

namespace gpumux::agent {
namespace {

// A prepared statement, finalised on scope exit.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK)
      throw Internal(sqlite3_errmsg(db));
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement& Bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.c_str(), int(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  std::string Text(int column) const {
    return reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  }
  bool Step() {
    int rc = sqlite3_step(stmt_);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) throw Internal(sqlite3_errmsg(db_));
    return rc == SQLITE_ROW;
  }
  TenantRecord Row() const {
    TenantRecord t;
    t.id = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, 0));
    t.gpu = sqlite3_column_int(stmt_, 1);
    t.limits.memory = uint64_t(sqlite3_column_int64(stmt_, 2));
    t.limits.cap_permille = uint32_t(sqlite3_column_int(stmt_, 3));
    t.limits.weight = uint32_t(sqlite3_column_int(stmt_, 4));
    t.limits.priority = node::Priority(sqlite3_column_int(stmt_, 5));
    t.owner = uid_t(sqlite3_column_int64(stmt_, 6));
    t.source = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, 7));
    t.instance = sqlite3_column_int(stmt_, 8);
    t.cgroup = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, 9));
    t.labels = {Column(10), Column(11), Column(12), Column(13)};
    for (const std::string& place : SplitCommas(Column(14))) t.more.push_back(ParsePlace(place));
    return t;
  }

 private:
  std::string Column(int i) const {
    const unsigned char* text = sqlite3_column_text(stmt_, i);
    return text ? reinterpret_cast<const char*>(text) : "";
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

constexpr const char* kColumns =
    "id, gpu, memory, cap_permille, weight, priority, owner, source, instance, cgroup, "
    "label_namespace, label_pod, label_container, label_job, more_gpus";
// Columns added after the first release, with what older rows hold.
constexpr const char* kAddedColumns[] = {"cgroup",          "label_namespace", "label_pod",
                                         "label_container", "label_job",       "more_gpus"};

}  // namespace

AgentStore::AgentStore(const std::string& path) {
  if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) {
    std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw Internal(path + ": " + why);
  }
  try {
    Exec("PRAGMA journal_mode=WAL");
    Exec("PRAGMA synchronous=FULL");
    Exec(
        "CREATE TABLE IF NOT EXISTS tenants (id TEXT PRIMARY KEY, gpu INTEGER NOT NULL, memory "
        "INTEGER NOT NULL, "
        "cap_permille INTEGER NOT NULL, weight INTEGER NOT NULL, priority INTEGER NOT NULL, owner "
        "INTEGER NOT NULL, "
        "source TEXT NOT NULL, instance INTEGER NOT NULL DEFAULT -1, cgroup TEXT NOT NULL DEFAULT "
        "'')");
    // A store written before a column existed gets it, empty (a cgroup: any process; labels:
    // none).
    std::set<std::string> present;
    {
      Statement columns(db_, "PRAGMA table_info(tenants)");
      while (columns.Step()) present.insert(columns.Text(1));
    }
    for (const char* column : kAddedColumns) {
      if (!present.count(column))
        Exec(std::string("ALTER TABLE tenants ADD COLUMN ") + column + " TEXT NOT NULL DEFAULT ''");
    }
    Exec(
        "CREATE TABLE IF NOT EXISTS gpus (gpu INTEGER PRIMARY KEY, mode INTEGER NOT NULL, layout "
        "TEXT NOT NULL)");
  } catch (const Error& e) {
    sqlite3_close(db_);
    throw e.Within(path);
  }
}

AgentStore::~AgentStore() { sqlite3_close(db_); }

void AgentStore::Exec(const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    std::string why = error ? error : "unknown error";
    sqlite3_free(error);
    throw Internal(why);
  }
}

void AgentStore::Put(const TenantRecord& t) {
  std::string more_gpus = JoinCommas(t.more, PlaceText);
  Statement(db_, (std::string("INSERT OR REPLACE INTO tenants (") + kColumns +
                  ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
                     .c_str())
      .Bind(1, t.id)
      .Bind(2, t.gpu)
      .Bind(3, int64_t(t.limits.memory))
      .Bind(4, t.limits.cap_permille)
      .Bind(5, t.limits.weight)
      .Bind(6, int64_t(t.limits.priority))
      .Bind(7, int64_t(t.owner))
      .Bind(8, t.source)
      .Bind(9, t.instance)
      .Bind(10, t.cgroup)
      .Bind(11, t.labels.pod_namespace)
      .Bind(12, t.labels.pod)
      .Bind(13, t.labels.container)
      .Bind(14, t.labels.job)
      .Bind(15, more_gpus)
      .Step();
}

bool AgentStore::Remove(const std::string& id) {
  Statement(db_, "DELETE FROM tenants WHERE id = ?").Bind(1, id).Step();
  return sqlite3_changes(db_) > 0;
}

std::optional<TenantRecord> AgentStore::Find(const std::string& id) const {
  Statement s(db_, (std::string("SELECT ") + kColumns + " FROM tenants WHERE id = ?").c_str());
  s.Bind(1, id);
  if (!s.Step()) return std::nullopt;
  return s.Row();
}

std::vector<TenantRecord> AgentStore::All() const {
  Statement s(db_, (std::string("SELECT ") + kColumns + " FROM tenants ORDER BY gpu, id").c_str());
  std::vector<TenantRecord> out;
  while (s.Step()) out.push_back(s.Row());
  return out;
}

}  // namespace gpumux::agent

namespace gpumux::agent {

void AgentStore::SetGpuMode(const GpuMode& m) {
  std::string layout = JoinCommas(m.layout);
  Statement(db_, "INSERT OR REPLACE INTO gpus (gpu, mode, layout) VALUES (?, ?, ?)")
      .Bind(1, m.gpu)
      .Bind(2, m.mode)
      .Bind(3, layout)
      .Step();
}

std::vector<AgentStore::GpuMode> AgentStore::GpuModes() const {
  Statement s(db_, "SELECT gpu, mode, layout FROM gpus ORDER BY gpu");
  std::vector<GpuMode> out;
  while (s.Step()) {
    GpuMode m{int(s.Int(0)), int(s.Int(1)), {}};
    std::string layout = s.Text(2);
    for (size_t start = 0; start < layout.size();) {
      size_t comma = std::min(layout.find(',', start), layout.size());
      m.layout.push_back(layout.substr(start, comma - start));
      start = comma + 1;
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace gpumux::agent

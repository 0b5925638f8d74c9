// Closed forms: with p ranks and buffers filled from the rank and the index.
#include "collective_checks.h"

#include <gtest/gtest.h>

#include <vector>

namespace tera::testing {

void check_all_reduce(Communicator& c) {
  const int p = c.size(), r = c.rank();
  std::vector<float> buf(37);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(r + static_cast<int>(i));
  c.all_reduce_sum(buf.data(), static_cast<int64_t>(buf.size()));
  for (size_t i = 0; i < buf.size(); ++i) ASSERT_EQ(buf[i], static_cast<float>(p * (p - 1) / 2 + p * static_cast<int>(i)));
  EXPECT_EQ(c.all_reduce_max(1.5 * r), 1.5 * (p - 1));
  EXPECT_EQ(c.all_reduce_sum(static_cast<double>(r + 1)), p * (p + 1) / 2.0);
  std::vector<int64_t> big = {int64_t{1} << 40, r};
  c.all_reduce(big.data(), 2, CommType::i64, ReduceOp::sum);
  EXPECT_EQ(big[0], p * (int64_t{1} << 40));
  EXPECT_EQ(big[1], p * (p - 1) / 2);
}

void check_reduce_scatter(Communicator& c) {
  const int p = c.size(), r = c.rank();
  const int n = 5;
  std::vector<float> send(static_cast<size_t>(p * n)), recv(n, -1.0f);
  for (int j = 0; j < p * n; ++j) send[static_cast<size_t>(j)] = static_cast<float>(r * 1000 + j);
  c.reduce_scatter(send.data(), recv.data(), n, CommType::f32);
  for (int i = 0; i < n; ++i) ASSERT_EQ(recv[static_cast<size_t>(i)], static_cast<float>(1000 * p * (p - 1) / 2 + p * (r * n + i)));
  // In place: the result replaces this rank's own block of send.
  std::vector<float> buf = send;
  c.reduce_scatter(buf.data(), buf.data() + r * n, n, CommType::f32);
  for (int i = 0; i < n; ++i) ASSERT_EQ(buf[static_cast<size_t>(r * n + i)], recv[static_cast<size_t>(i)]);
  // Max, in doubles.
  std::vector<double> dsend(static_cast<size_t>(p * n)), dmax(n);
  for (int j = 0; j < p * n; ++j) dsend[static_cast<size_t>(j)] = (j + r) % p == 0 ? 100.0 + j : static_cast<double>(-r);
  c.reduce_scatter(dsend.data(), dmax.data(), n, CommType::f64, ReduceOp::max);
  for (int i = 0; i < n; ++i) {
    const int j = r * n + i;
    // Rank (p - j % p) % p holds 100 + j there; every other rank holds <= 0.
    ASSERT_EQ(dmax[static_cast<size_t>(i)], 100.0 + j);
  }
}

void check_concurrent_reduce_scatters(Communicator& c) {
  // Several non-blocking reduce-scatters in flight on one communicator,
  // completed in the reverse of their start order: each must match its own
  // messages. Large enough blocks that the transport cannot buffer them eagerly.
  const int p = c.size(), r = c.rank();
  const int n = 50000, k = 3;
  std::vector<std::vector<float>> send(k, std::vector<float>(static_cast<size_t>(p * n)));
  std::vector<std::vector<float>> recv(k, std::vector<float>(n, -1.0f));
  std::vector<Request> reqs;
  for (int op = 0; op < k; ++op) {
    for (int j = 0; j < p * n; ++j) send[static_cast<size_t>(op)][static_cast<size_t>(j)] = static_cast<float>((op + 1) * (r + 1)) + static_cast<float>(j % 7);
    reqs.push_back(c.ireduce_scatter(send[static_cast<size_t>(op)].data(), recv[static_cast<size_t>(op)].data(), n, CommType::f32, ReduceOp::sum));
  }
  for (int op = k; op-- > 0;) c.wait(reqs[static_cast<size_t>(op)]);
  for (int op = 0; op < k; ++op) {
    for (int i = 0; i < n; ++i) {
      const int j = r * n + i;
      ASSERT_EQ(recv[static_cast<size_t>(op)][static_cast<size_t>(i)], static_cast<float>((op + 1) * p * (p + 1) / 2 + p * (j % 7)));
    }
  }
}

void check_all_gather(Communicator& c) {
  const int p = c.size(), r = c.rank();
  const int n = 3;
  std::vector<int32_t> send(n), recv(static_cast<size_t>(p * n), -1);
  for (int i = 0; i < n; ++i) send[static_cast<size_t>(i)] = r * 100 + i;
  c.all_gather(send.data(), recv.data(), n, CommType::i32);
  for (int q = 0; q < p; ++q)
    for (int i = 0; i < n; ++i) ASSERT_EQ(recv[static_cast<size_t>(q * n + i)], q * 100 + i);
  // In place: each rank's contribution already sits at its slot.
  std::vector<float> buf(static_cast<size_t>(p * n), -1.0f);
  for (int i = 0; i < n; ++i) buf[static_cast<size_t>(r * n + i)] = static_cast<float>(r * 10 + i);
  c.all_gather(buf.data() + r * n, buf.data(), n, CommType::f32);
  for (int q = 0; q < p; ++q)
    for (int i = 0; i < n; ++i) ASSERT_EQ(buf[static_cast<size_t>(q * n + i)], static_cast<float>(q * 10 + i));
}

void check_broadcast(Communicator& c) {
  const int p = c.size(), r = c.rank();
  std::vector<double> buf(4, static_cast<double>(r));
  c.broadcast(buf.data(), 4, CommType::f64, p - 1);
  for (double v : buf) ASSERT_EQ(v, static_cast<double>(p - 1));
}

void check_send_recv_ring(Communicator& c) {
  const int p = c.size(), r = c.rank();
  if (p == 1) return;
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  int64_t out[2] = {r, 7 * r}, in[2] = {-1, -1};
  Request rr = c.irecv(in, sizeof(in), prev, 7);
  Request sr = c.isend(out, sizeof(out), next, 7);
  c.wait(rr);
  c.wait(sr);
  EXPECT_EQ(in[0], prev);
  EXPECT_EQ(in[1], 7 * prev);
  // Two messages on the same (src, tag) arrive in order.
  float a = 1.0f + static_cast<float>(r), b = 2.0f + static_cast<float>(r), x = 0, y = 0;
  Request r1 = c.irecv(&x, 4, prev, 9), r2 = c.irecv(&y, 4, prev, 9);
  Request s1 = c.isend(&a, 4, next, 9), s2 = c.isend(&b, 4, next, 9);
  c.wait(r1);
  c.wait(r2);
  c.wait(s1);
  c.wait(s2);
  EXPECT_EQ(x, 1.0f + static_cast<float>(prev));
  EXPECT_EQ(y, 2.0f + static_cast<float>(prev));
}

void check_split(Communicator& c) {
  const int p = c.size(), r = c.rank();
  // Even and odd ranks, ordered by descending parent rank.
  auto sub = c.split(r % 2, -r, "parity");
  int expected_size = 0, expected_rank = 0;
  for (int q = 0; q < p; ++q) {
    if (q % 2 != r % 2) continue;
    ++expected_size;
    if (q > r) ++expected_rank;
  }
  EXPECT_EQ(sub->size(), expected_size);
  EXPECT_EQ(sub->rank(), expected_rank);
  double sum_of_parents = 0;
  for (int q = r % 2; q < p; q += 2) sum_of_parents += q;
  EXPECT_EQ(sub->all_reduce_sum(static_cast<double>(r)), sum_of_parents);
  EXPECT_EQ(sub->name(), "parity");
}

void check_nonblocking_overlap(Communicator& c) {
  const int p = c.size(), r = c.rank();
  std::vector<float> a(1000, 1.0f), g(static_cast<size_t>(2 * p));
  float mine[2] = {static_cast<float>(r), static_cast<float>(-r)};
  Request ra = c.iall_reduce(a.data(), 1000, CommType::f32, ReduceOp::sum);
  Request rg = c.iall_gather(mine, g.data(), 2, CommType::f32);
  while (!c.test(rg)) {
  }
  c.wait(ra);
  for (float v : a) ASSERT_EQ(v, static_cast<float>(p));
  for (int q = 0; q < p; ++q) {
    ASSERT_EQ(g[static_cast<size_t>(2 * q)], static_cast<float>(q));
    ASSERT_EQ(g[static_cast<size_t>(2 * q + 1)], static_cast<float>(-q));
  }
}

void check_byte_accounting(Communicator& c) {
  const int p = c.size();
  c.reset_stats();
  std::vector<float> buf(static_cast<size_t>(12 * p));
  c.all_reduce_sum(buf.data(), 12 * p);  // 2 (p-1)/p * 48p bytes
  EXPECT_EQ(c.stats().bytes, 2 * (p - 1) * 48);
  c.reset_stats();
  std::vector<float> out(12);
  c.reduce_scatter(buf.data(), out.data(), 12, CommType::f32);  // (p-1)/p * 48p
  EXPECT_EQ(c.stats().bytes, (p - 1) * 48);
  c.reset_stats();
  c.all_gather(out.data(), buf.data(), 12, CommType::f32);
  EXPECT_EQ(c.stats().bytes, (p - 1) * 48);
  EXPECT_EQ(c.stats().calls, 1);
}

}  // namespace tera::testing

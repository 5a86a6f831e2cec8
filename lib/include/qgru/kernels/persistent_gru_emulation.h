#pragma once
// The persistent GRU kernel (cuda/src/persistent_gru.cu, plan and protocol in qgru/kernels/persistent_gru.h) run on
// the host: every block a small state machine stepped one at a time by a seeded random scheduler, with the kernel's
// own QGRU_HD functions for the slice, the dot products, the cell and the protocol (phases, parity, arrivals).
// A block's phase is two scheduler moves: (1) wait for the arrivals the phase needs (a block that is not ready
// yields: the scheduler picks another), then stage the exchange buffer it reads into its shared memory; (2) compute,
// write its units, publish one arrival. Between any two moves any other block may run.
// Who waits for whom: plan.sync's groups (persistent_sync_group). Grid: one counter over every block. Cluster: a
// counter per cluster of plan.cluster_blocks consecutive blocks, as the hardware groups a 1-D grid, so clusters drift
// phases apart under the scheduler and one cluster's rows are overwritten while another is still phases behind.
// Poison: whenever the last block of a group publishes a phase, the group's rows of every exchange buffer that no
// later read may see, by the protocol's own reasoning written out here (not by calling its functions), are
// overwritten with random bytes; a read of rows that were not yet published (a skipped wait, a cluster that does not
// hold every writer of its rows) or of the wrong parity sees garbage, and the codes differ from the reference. The
// fault switches break the protocol on purpose so the tests show they would catch it.
// ClusterDsmem: move (2) ends with the block's pushes (persistent_phase_pushes, each thread's persistent_push_stride walk: its outbox into the push buffer of every
// block of its cluster, straight into their shared memory), move (1) stages only phase 0; when a cluster's last block
// finishes a phase, the staging buffer the phase read is poisoned in every block of the cluster (the next phase's
// pushes refill it), so a phase that read a buffer no push filled, or a push into a buffer still to be read, shows.
// Throws qgru::Error on a deadlock (no block can move while some have phases left).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/kernels/gru_step.h"
#include "qgru/kernels/int8_gemm_layout.h"
#include "qgru/kernels/persistent_gru.h"

namespace qgru::kernels {

// The tensor-core instructions of the int8 kernel's dot products, restated on the host from the PTX ISA (not from
// persistent_gru.h's offset functions, which they check):
//   ldmatrix .m8n8 .b16: lanes 8i .. 8i + 7 give the 16-byte row addresses of matrix i; lane t receives, in register
//     i, bytes 4·(t % 4) .. + 3 of matrix i's row t / 4;
//   mma .m16n8k32 .row.col .s32.s8.s8.s32 (g = lane / 4, q = lane % 4): A register r holds row g + 8·(r % 2), k
//     16·(r / 2) + 4q .. + 3; B register r holds k 16r + 4q .. + 3 of column g; D element e is row g + 8·(e / 2),
//     column 2q + e % 2. The .m16n8k16 form: A registers 0, 1 (k 4q .. + 3 of rows g, g + 8), B register 0.
inline uint32_t emulated_ldmatrix(const unsigned char* base, const int32_t (&offsets)[32], int matrix, int lane) {
  uint32_t r;
  std::memcpy(&r, base + offsets[8 * matrix + lane / 4] + 4 * (lane % 4), 4);
  return r;
}
inline void emulated_mma_s8(int k_size, const uint32_t (&a)[32][4], const uint32_t (&b)[32][2], int32_t (&d)[32][4]) {
  int32_t A[16][32] = {}, B[32][8] = {};
  const auto byte = [](uint32_t word, int i) { return static_cast<int32_t>(static_cast<int8_t>(word >> (8 * i) & 0xFFu)); };
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, q = l % 4;
    for (int r = 0; r < (k_size == 32 ? 4 : 2); ++r)
      for (int i = 0; i < 4; ++i) A[g + 8 * (r % 2)][16 * (r / 2) + 4 * q + i] = byte(a[l][r], i);
    for (int r = 0; r < (k_size == 32 ? 2 : 1); ++r)
      for (int i = 0; i < 4; ++i) B[16 * r + 4 * q + i][g] = byte(b[l][r], i);
  }
  for (int l = 0; l < 32; ++l)
    for (int e = 0; e < 4; ++e) {
      const int row = l / 4 + 8 * (e / 2), col = 2 * (l % 4) + e % 2;
      int64_t sum = d[l][e];
      for (int kk = 0; kk < k_size; ++kk) sum += int64_t{A[row][kk]} * B[kk][col];
      if (sum < INT32_MIN || sum > INT32_MAX) throw Error("emulated mma: an int32 accumulator overflowed");
      d[l][e] = static_cast<int32_t>(sum);
    }
}

struct PersistentEmulationOptions {
  uint32_t seed = 1;
  bool fault_wrong_parity = false;  // stage h from the other exchange buffer
  bool fault_skip_wait = false;     // never wait for the arrivals
};

struct PersistentEmulationResult {
  std::vector<int32_t> out;  // [T, N, H] by input time
  int64_t yields = 0;        // moves a block could not make because its wait was not satisfied
  int64_t poisonings = 0;    // buffers overwritten with garbage (a group's rows of one buffer counts once)
  int64_t max_phase_gap = 0; // the most phases any block ran ahead of another (Grid: at most 1; clusters drift)
};

// The emulation for one operand width: Stored int8_t / Acc int32_t (Int8) or int16_t / int64_t (Wide16).
template <class Stored, class Acc>
PersistentEmulationResult emulate_persistent_gru_cell_t(const PersistentGruPlan& plan, const GruCellParamsView& view,
                                                        const int32_t* q_W, const int32_t* q_R, int64_t C,
                                                        const CodeSpace& x_space, const int32_t* q_x, int64_t T,
                                                        const int32_t* q_h0, bool reverse, const int32_t* lengths,
                                                        const PersistentEmulationOptions& options) {
  const int64_t H = view.hidden_size, N = plan.N, U = plan.units_per_block, B = plan.blocks, P = plan.phases_per_step;
  PersistentEmulationResult result;
  // No code is INT32_MIN: an output element no block wrote stays that and differs from the reference.
  result.out.assign(static_cast<size_t>(T * N * H), INT32_MIN);
  if (T == 0) return result;
  constexpr bool int8_path = sizeof(Stored) == 1;
  const GruGemmLayout l = persistent_gemm_layout(plan.path, H, C, N, T);
  int32_t x_offset = 0, h_offset = 0;
  const std::string why = int8_path ? int8_operand_offset(x_space.q_min, x_space.q_max, x_offset) +
                                          int8_operand_offset(view.h.q_min, view.h.q_max, h_offset)
                                    : int16_operand_offset(x_space.q_min, x_space.q_max, x_offset) +
                                          int16_operand_offset(view.h.q_min, view.h.q_max, h_offset);
  if (!why.empty()) throw Error("persistent GRU emulation: " + why);
  // The device's global memory: packed operands, B-1 for every step (the path's GEMM), exchange buffers, the state,
  // the output.
  std::vector<Stored> W, R;
  if constexpr (int8_path) {
    W = pack_int8_rows(q_W, 3 * H, C, l.rows_p, l.C_p, 0, "q_W");
    R = pack_int8_rows(q_R, 3 * H, H, l.rows_p, l.H_p, 0, "q_R");
  } else {
    W = pack_int16_rows(q_W, 3 * H, C, l.rows_p, l.C_p, 0, "q_W");
    R = pack_int16_rows(q_R, 3 * H, H, l.rows_p, l.H_p, 0, "q_R");
  }
  const auto x_stored = pack_signed_steps<Stored>(q_x, T, N, C, l.N_p, l.C_p, x_offset, "q_x");
  std::vector<Acc> gemm_x(static_cast<size_t>(T * l.N_p * l.rows_p));
  if constexpr (int8_path) {
    gemm_int8_tn_reference(l.rows_p, T * l.N_p, l.C_p, W.data(), l.C_p, x_stored.data(), l.C_p, gemm_x.data(), l.rows_p);
  } else {
    emulate_wide_gemm_tiled(plan_wide_gemm(l.rows_p, T * l.N_p, l.C_p), W.data(), l.C_p, x_stored.data(), l.C_p,
                            gemm_x.data(), l.rows_p);
  }
  std::vector<int32_t> h_state(static_cast<size_t>(N * H), view.h.zp);
  if (q_h0 != nullptr) h_state.assign(q_h0, q_h0 + N * H);
  std::mt19937 rng(options.seed);
  const int64_t buffer_codes = l.N_p * l.H_p;  // one exchange buffer, in Stored codes
  // Rows [n0, n0 + rows) of an exchange buffer ([N_p, H_p] codes) overwritten with random codes.
  auto poison_rows = [&](Stored* at, int64_t n0, int64_t rows) {
    for (int64_t i = n0 * l.H_p; i < (n0 + rows) * l.H_p && i < buffer_codes; ++i) at[i] = static_cast<Stored>(rng());
    ++result.poisonings;
  };
  auto poison = [&](Stored* at) { poison_rows(at, 0, l.N_p); };
  std::vector<Stored> h_exchange(static_cast<size_t>(2 * buffer_codes));
  poison(h_exchange.data() + buffer_codes);
  const auto h0_packed = pack_signed_steps<Stored>(h_state.data(), 1, N, H, l.N_p, l.H_p, h_offset, "q_h0");
  std::copy(h0_packed.begin(), h0_packed.end(), h_exchange.begin());
  std::vector<Stored> reset_exchange(static_cast<size_t>(buffer_codes));
  poison(reset_exchange.data());
  // The arrivals of each group (one for Grid, one per cluster), as its counter or barrier would count them.
  std::vector<uint64_t> arrivals(static_cast<size_t>(persistent_sync_group(plan, B - 1).index + 1), 0);

  struct Block {
    PersistentSlice slice;
    std::vector<int32_t> smem;  // the dynamic shared memory, plan.smem's layout
    int64_t index = 0;          // blockIdx.x
    int64_t phase = 0;          // next phase to run
    bool staged = false;        // move (1) of `phase` done
  };
  const bool dsmem = persistent_dsmem(plan.sync);
  std::vector<Block> blocks(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    Block& k = blocks[static_cast<size_t>(b)];
    k.index = b;
    k.slice = persistent_block_slice(H, U, N, plan.rows_per_block, b);
    k.smem.assign(static_cast<size_t>(plan.smem.total_bytes / 4), 0x5A5A5A5A);
    auto* bytes = reinterpret_cast<unsigned char*>(k.smem.data());
    if (dsmem) {  // the kernel zeroes every staging buffer and the outbox before the first push
      std::memset(bytes + plan.smem.stage_offset, 0, static_cast<size_t>(plan.smem.stage_buffers * plan.smem.stage_bytes));
      std::memset(bytes + plan.smem.outbox_offset, 0, static_cast<size_t>(plan.smem.outbox_bytes));
    }
    const auto row_bytes = static_cast<size_t>(l.H_p) * sizeof(Stored);  // of a row's codes
    const int64_t row_stride = persistent_smem_row_bytes(l.H_p, sizeof(Stored));
    for (int64_t row = 0; row < 3 * U; ++row) {  // R's slice, once
      const int64_t source = persistent_r_source_row(H, U, k.slice, row);
      unsigned char* to = bytes + plan.smem.r_offset + row * row_stride;
      if (source < 0) std::memset(to, 0, row_bytes);
      else std::memcpy(to, R.data() + source * l.H_p, row_bytes);
    }
  }
  const int64_t phases = T * P;
  auto ready = [&](const Block& k) {
    const PersistentSyncGroup g = persistent_sync_group(plan, k.index);
    return options.fault_skip_wait ||
           arrivals[static_cast<size_t>(g.index)] >= persistent_arrivals_before(k.phase, g.blocks);
  };
  const PersistentBuffers<Stored, Acc> buffers =
      persistent_buffers<Stored, Acc>(plan, l, T, reverse, x_offset, h_offset, gemm_x.data(), h_exchange.data(),
                                      reset_exchange.data(), h_state.data(), result.out.data(), lengths);
  // The blocks' folds, once per launch (the kernel's threads split the units; the result is the same).
  for (Block& k : blocks) {
    auto* folds = reinterpret_cast<GruUnitFolds*>(reinterpret_cast<unsigned char*>(k.smem.data()) + plan.smem.folds_offset);
    persistent_fill_folds<Stored, Acc>(view, buffers, k.slice, folds, 0, 1);
  }
  // The phase a block reads: its own, or with fault_wrong_parity the other h buffer (part A / the only part).
  auto read_phase = [&](const Block& k) {
    PersistentPhaseInfo ph = persistent_phase_info(k.phase, static_cast<int>(P), T, reverse, U);
    if (options.fault_wrong_parity) ph.step ^= 1;
    return ph;
  };
  // Where the phase's staged rows lie in the block's shared memory: the staging region, or ClusterDsmem's buffer.
  auto stage_at = [&](const PersistentPhaseInfo& ph) {
    return plan.smem.stage_offset + (dsmem ? persistent_stage_buffer(ph) * plan.smem.stage_bytes : 0);
  };
  // Move (1): stage the block's batch rows of the buffer the phase reads (ClusterDsmem: phase 0 only; the pushes
  // of the phase before filled the others).
  auto stage = [&](Block& k) {
    const PersistentPhaseInfo ph = read_phase(k);
    const auto row_bytes = static_cast<size_t>(l.H_p) * sizeof(Stored);  // contiguous rows in the buffer, strided here
    const int64_t row_stride = persistent_smem_row_bytes(l.H_p, sizeof(Stored));
    const auto* from = reinterpret_cast<const unsigned char*>(persistent_stage_source(buffers, ph, k.slice));
    for (int64_t n = 0; !(dsmem && k.phase > 0) && n < k.slice.rows; ++n) {
      std::memcpy(reinterpret_cast<unsigned char*>(k.smem.data()) + stage_at(ph) + n * row_stride,
                  from + n * static_cast<int64_t>(row_bytes), row_bytes);
    }
    k.staged = true;
  };
  // Move (2): the dot products (the warps' sums, lane by lane), the units, the arrival.
  auto compute = [&](Block& k) {
    const PersistentPhaseInfo ph = persistent_phase_info(k.phase, static_cast<int>(P), T, reverse, U);
    const int64_t staged_at = stage_at(read_phase(k));
    const int32_t* r_words = k.smem.data() + plan.smem.r_offset / 4;
    const int32_t* stage_words = k.smem.data() + staged_at / 4;
    auto* acc = reinterpret_cast<Acc*>(reinterpret_cast<unsigned char*>(k.smem.data()) + plan.smem.acc_offset);
    const auto* folds =
        reinterpret_cast<const GruUnitFolds*>(reinterpret_cast<unsigned char*>(k.smem.data()) + plan.smem.folds_offset);
    const int64_t words = l.H_p * static_cast<int64_t>(sizeof(Stored)) / 4;  // of a row's codes
    const int64_t row_words = persistent_smem_row_bytes(l.H_p, sizeof(Stored)) / 4;  // the rows' stride
    if constexpr (sizeof(Stored) == 1) {
      // int8: warp by warp, each taking its items of the phase's tiles as the kernel's do, on the emulated tensor cores.
      const auto rows = static_cast<int32_t>(ph.rows), first_row = static_cast<int32_t>(ph.first_row);
      const auto batch_rows = static_cast<int32_t>(k.slice.rows);
      const auto row_bytes = static_cast<int32_t>(persistent_smem_row_bytes(l.H_p, 1));  // the rows' stride
      const PersistentMmaPlan mp = persistent_mma_plan(rows, batch_rows, static_cast<int32_t>(l.H_p));
      auto* acc32 = reinterpret_cast<int32_t*>(acc);
      const auto acc_row = static_cast<int32_t>(3 * U);
      if (mp.split_shift > 0) {
        for (int32_t n = 0; n < batch_rows; ++n)
          for (int32_t row = 0; row < rows; ++row) acc32[n * acc_row + first_row + row] = 0;
      }
      const auto* smem_bytes = reinterpret_cast<const unsigned char*>(k.smem.data());
      const unsigned char* r_base = smem_bytes + plan.smem.r_offset;
      const unsigned char* stage_base = smem_bytes + staged_at;
      for (int warp = 0; warp < kPersistentMmaWarps; ++warp) {
        for (int32_t item = warp; item < (mp.tiles << mp.split_shift); item += kPersistentMmaWarps) {
          const PersistentMmaItem it = persistent_mma_item(mp, item);
          int32_t even[32][4] = {}, odd[32][4] = {};
          const auto step = [&](int32_t k0, int k_size, int32_t (&d)[32][4]) {
            int32_t a_offsets[32], b_offsets[32];
            for (int lane = 0; lane < 32; ++lane) {
              a_offsets[lane] = persistent_mma_a_offset(first_row, rows, it.mt, lane, row_bytes, k0);
              b_offsets[lane] = persistent_mma_b_offset(batch_rows, it.nt, lane, row_bytes, k0);
            }
            uint32_t a[32][4] = {}, b[32][2] = {};
            for (int lane = 0; lane < 32; ++lane) {
              for (int i = 0; i < (k_size == 32 ? 4 : 2); ++i) a[lane][i] = emulated_ldmatrix(r_base, a_offsets, i, lane);
              for (int i = 0; i < (k_size == 32 ? 2 : 1); ++i) b[lane][i] = emulated_ldmatrix(stage_base, b_offsets, i, lane);
            }
            emulated_mma_s8(k_size, a, b, d);
          };
          // as the kernel's: k32 steps alternately into the two chains from the item's first, the k16 tail into odd
          for (int32_t ks = it.k_begin; ks < it.k_end; ++ks) step(32 * ks, 32, ((ks - it.k_begin) & 1) == 0 ? even : odd);
          if (it.tail16) step(32 * mp.k32, 16, odd);
          for (int lane = 0; lane < 32; ++lane)
            for (int e = 0; e < 4; ++e) {
              const PersistentMmaAt at = persistent_mma_acc_at(it.mt, it.nt, lane, e);
              if (at.row >= rows || at.n >= batch_rows) continue;
              int32_t& to = acc32[at.n * acc_row + first_row + at.row];
              to = mp.split_shift == 0 ? even[lane][e] + odd[lane][e] : to + even[lane][e] + odd[lane][e];
            }
        }
      }
    } else {
    // Dot group by dot group, each walking its products as the kernel's do (the stride divided once per phase kind).
    for (int group = 0; group < kPersistentDotGroups; ++group) {
      const PersistentSplitStride stride =
          persistent_split_stride(group, kPersistentDotGroups, static_cast<int32_t>(ph.rows));
      for (PersistentSplitWalk d = stride.start; d.major < k.slice.rows;
           persistent_split_walk_advance(d, stride, static_cast<int32_t>(ph.rows))) {
        const int64_t slice_row = ph.first_row + d.minor, n = d.major;  // the product's R row and staged batch row
        Acc sum = 0;  // exact: the bounds in persistent_gru.h
        for (int lane = 0; lane < kPersistentDotLanes; ++lane) {
          sum += persistent_dot_share<Stored, Acc>(r_words + slice_row * row_words, stage_words + n * row_words, words,
                                                   lane, kPersistentDotLanes);
        }
        acc[n * 3 * U + slice_row] = sum;
      }
    }
    }
    // Thread by thread, each walking its elements as the kernel's do.
    auto* outbox = dsmem ? reinterpret_cast<Stored*>(reinterpret_cast<unsigned char*>(k.smem.data()) + plan.smem.outbox_offset)
                         : nullptr;
    for (int thread = 0; thread < kPersistentThreads; ++thread) {
      persistent_phase_elements<Stored, Acc>(view, buffers, k.slice, ph, acc, folds,
                                             persistent_element_stride(k.slice, thread, kPersistentThreads), outbox);
    }
    const PersistentSyncGroup g = persistent_sync_group(plan, k.index);  // the block's cluster (Grid: every block)
    if (dsmem && k.phase + 1 < phases) {  // the pushes, thread by thread, each walking its items as the kernel's do
      const PersistentPushes push = persistent_phase_pushes(ph, static_cast<int>(P), k.slice, U, sizeof(Stored), l.H_p,
                                                            g.blocks, plan.smem.stage_offset, plan.smem.stage_bytes);
      for (int32_t thread = 0; thread < kPersistentThreads; ++thread) {
        const PersistentPushStride walk = persistent_push_stride(push, thread, kPersistentThreads);
        for (PersistentPushWalk w = walk.start; w.peer < push.peers; persistent_push_walk_advance(w, walk, push)) {
          const PersistentPush item = persistent_push_at(push, w);
          if (item.peer >= g.blocks || g.first_block + item.peer >= B) throw Error("persistent GRU emulation: a push past the cluster");
          Block& peer = blocks[static_cast<size_t>(g.first_block + item.peer)];
          if (item.to < 0 || item.to + push.chunk_bytes > plan.smem.total_bytes) throw Error("persistent GRU emulation: a push past shared memory");
          std::memcpy(reinterpret_cast<unsigned char*>(peer.smem.data()) + item.to,
                      reinterpret_cast<const unsigned char*>(outbox) + item.from, static_cast<size_t>(push.chunk_bytes));
        }
      }
    }
    uint64_t& group_arrivals = arrivals[static_cast<size_t>(g.index)];
    ++group_arrivals;
    k.staged = false;
    ++k.phase;
    if (group_arrivals % static_cast<uint64_t>(g.blocks) != 0) return;
    // The group's last block published phase `done`: poison the group's rows that no later read may see.
    const uint64_t done = group_arrivals / static_cast<uint64_t>(g.blocks) - 1;
    const uint64_t step = done / static_cast<uint64_t>(P);
    const int64_t n0 = g.n0, rows = g.rows > 0 ? g.rows : 0;
    if (dsmem) {  // the staging buffer the phase read, in every block of the cluster: consumed; the next pushes refill it
      const int64_t buffer = persistent_stage_buffer(persistent_phase_info(static_cast<int64_t>(done), static_cast<int>(P), T, reverse, U));
      for (int64_t b = g.first_block; b < g.first_block + g.blocks && b < B; ++b) {
        auto* at = reinterpret_cast<unsigned char*>(blocks[static_cast<size_t>(b)].smem.data()) + plan.smem.stage_offset +
                   buffer * plan.smem.stage_bytes;
        for (int64_t i = 0; i < plan.smem.stage_bytes; ++i) at[i] = static_cast<unsigned char>(rng());
      }
      ++result.poisonings;
    }
    if (P == 1) {
      // h_step's buffer; h_{step+1} in the other
      poison_rows(h_exchange.data() + static_cast<int64_t>(step % 2) * buffer_codes, n0, rows);
    } else if (done % 2 == 0) {
      poison_rows(h_exchange.data(), n0, rows);  // phase A: every block staged h_step, h_{step+1} not yet written
      poison_rows(h_exchange.data() + buffer_codes, n0, rows);
    } else {
      poison_rows(reset_exchange.data(), n0, rows);  // phase B: the reset codes consumed; h_{step+1} in (step + 1) % 2
      poison_rows(h_exchange.data() + static_cast<int64_t>(step % 2) * buffer_codes, n0, rows);
    }
  };
  std::vector<int64_t> unfinished;
  for (;;) {
    unfinished.clear();
    bool movable = false;
    for (int64_t b = 0; b < B; ++b) {
      const Block& k = blocks[static_cast<size_t>(b)];
      if (k.phase >= phases) continue;
      unfinished.push_back(b);
      movable = movable || k.staged || ready(k);
    }
    if (unfinished.empty()) break;
    if (!movable) {
      uint64_t total = 0;
      for (uint64_t a : arrivals) total += a;
      throw Error("persistent GRU emulation: deadlock at " + std::to_string(total) + " arrivals");
    }
    Block& k = blocks[static_cast<size_t>(unfinished[rng() % unfinished.size()])];
    if (k.staged) {
      compute(k);
      int64_t low = phases, high = 0;
      for (const Block& other : blocks) {
        low = std::min(low, other.phase);
        high = std::max(high, other.phase);
      }
      result.max_phase_gap = std::max(result.max_phase_gap, high - low);
    } else if (ready(k)) {
      stage(k);
    } else {
      ++result.yields;
    }
  }
  return result;
}

// The persistent kernel's run of one cell on the host, the plan's operand width (Int8 / Wide16), [T, N, H] by input time.
inline PersistentEmulationResult emulate_persistent_gru_cell(const PersistentGruPlan& plan, const GruCellParamsView& view,
                                                             const int32_t* q_W, const int32_t* q_R, int64_t C,
                                                             const CodeSpace& x_space, const int32_t* q_x, int64_t T,
                                                             const int32_t* q_h0, bool reverse, const int32_t* lengths,
                                                             const PersistentEmulationOptions& options = {}) {
  if (!plan.persistent) throw Error("persistent GRU emulation: the plan took the per-step path: " + plan.reason);
  if (plan.H != view.hidden_size) {
    throw Error("persistent GRU emulation: plan for H=" + std::to_string(plan.H) + ", cell H=" + std::to_string(view.hidden_size));
  }
  if (plan.path == GruGemmPath::Int8) {
    return emulate_persistent_gru_cell_t<int8_t, int32_t>(plan, view, q_W, q_R, C, x_space, q_x, T, q_h0, reverse, lengths,
                                                          options);
  }
  return emulate_persistent_gru_cell_t<int16_t, int64_t>(plan, view, q_W, q_R, C, x_space, q_x, T, q_h0, reverse, lengths,
                                                         options);
}

}  // namespace qgru::kernels

"""The discrete-event core: one continuous-batching engine pod serving a sorted arrival stream.

Each loop iteration schedules one step (FCFS admission under the running cap, the state-slot cap and the KV
pool; a per-step token budget shared by decodes and prefill chunks) and then jumps over every following step
with the same composition in closed form: step j of a run costs alpha + beta*j (live tokens grow linearly),
so the number of steps until the next finish, prefill completion, admissible arrival, KV exhaustion or
stats boundary is solved directly. Decoders advance together, so a global decode counter G and a heap of
finish counters replace per-request updates: an iteration costs O(log n), never O(batch).
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque
from dataclasses import dataclass

import numpy as np

from attribution.simulate.cache import PrefixCache

NAN = float("nan")
STEP_FIELDS = (
    "t", "n_steps", "duration_s", "step_s", "step_growth_s", "running", "waiting", "prefill_tokens",
    "prefill_reqs", "decode_reqs", "new_seqs", "new_tokens", "new_cached", "kv_tokens", "preemptions",
    "wait_area_s",
)  # fmt: skip
STAT_FIELDS = (
    "t", "running", "waiting", "kv_tokens", "prompt_tokens", "gen_tokens", "preemptions", "new_seqs",
    "hit_tokens", "query_tokens",
)  # fmt: skip
HIT_WINDOW = 1000  # vLLM's prefix-cache hit rate covers the last 1000 requests


@dataclass(frozen=True)
class PodConfig:
    pool: int  # KV pool, tokens
    cap: int  # running requests allowed (max_running_requests, already capped by state slots // k)
    budget: int  # tokens per step (max_num_batched_tokens / chunked_prefill_size)
    mixed: bool  # True: decodes and prefill chunks share a step; False: prefill steps pause decoding
    base: float
    p_tok: float
    p_attn: float
    d_seq: float
    d_tok: float
    cache: bool  # simulate the prefix cache
    block: int  # prefix-cache block size in tokens
    interval: float  # stats interval (vLLM logs every 10 s)
    record_steps: bool
    long_min: int = 0  # prefill of a request whose KV length (ptot) exceeds this costs long_scale times as much
    long_scale: float = 1.0


def _columns(buf: array, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    rows = np.frombuffer(buf, dtype=np.float64).reshape(-1, len(names))
    return {k: rows[:, j].copy() for j, k in enumerate(names)}


def _f(alpha: float, beta: float, n: int) -> float:
    return n * alpha + beta * n * (n - 1) / 2


def _fit(alpha: float, beta: float, d: float) -> int:
    """Largest n >= 0 with f(n) = n*alpha + beta*n*(n-1)/2 <= d."""
    if d < alpha:
        return 0
    if beta <= 0.0:
        n = int(d / alpha)
    else:
        b = alpha - beta / 2
        n = int((-b + math.sqrt(b * b + 2 * beta * d)) / beta)
    while _f(alpha, beta, n + 1) <= d:
        n += 1
    while n > 0 and _f(alpha, beta, n) > d:
        n -= 1
    return n


def run_pod(arr: dict, cfg: PodConfig, hashes: list[list[int]] | None = None) -> dict:
    """Serve the arrivals `arr` (numpy arrays t, prompt, output, session, cached; sorted by t) to the end.

    Returns per-request numpy arrays (admitted, first, finished, cached, preemptions), the step runs (one row
    per run of identical steps, if cfg.record_steps) and the stats rows at every interval boundary.
    """
    t_arr = arr["t"].tolist()
    prompt = arr["prompt"].tolist()
    out = arr["output"].tolist()
    session = arr["session"].tolist()
    given = arr["cached"].tolist()
    n_req = len(t_arr)
    pool, cap, budget_max, mixed = cfg.pool, cfg.cap, cfg.budget, cfg.mixed
    base, p_tok, p_attn, d_seq, d_tok = cfg.base, cfg.p_tok, cfg.p_attn, cfg.d_seq, cfg.d_tok
    long_min, long_scale = cfg.long_min, cfg.long_scale
    interval, record, block = cfg.interval, cfg.record_steps, cfg.block
    cache = PrefixCache(block) if cfg.cache else None

    admitted = [NAN] * n_req
    first = [NAN] * n_req
    fin = [NAN] * n_req
    cached = [0] * n_req
    npre = [0] * n_req
    ptot = list(prompt)  # tokens to prefill: the prompt, plus output so far after a preemption
    rem = [0] * n_req  # prefill tokens still to compute
    gen = [0] * n_req  # output tokens generated (while not decoding)
    join_g = [0] * n_req
    fin_g = [0] * n_req
    state = [0] * n_req  # 0 waiting, 1 prefilling, 2 decoding, 3 done

    steps = array("d")  # rows of STEP_FIELDS, flattened
    stats = array("d")  # rows of STAT_FIELDS, flattened
    waiting: deque[int] = deque()
    order: dict[int, None] = {}  # running requests in admission order (preemption takes the newest)
    pf: list[int] = []  # running requests still prefilling, FCFS
    heap: list[tuple[int, int]] = []  # (G at which the decoder finishes, request)
    hits_win: deque[tuple[int, int]] = deque()
    hit_sum = query_sum = 0
    n_dec = dec_tok = kv = g = nrun = 0
    acc_prompt = acc_gen = acc_pre = acc_new = 0
    prev_active = False
    iterations = total_steps = 0

    i_next = 0
    t = t_arr[0] if n_req else 0.0
    next_b = (math.floor(t / interval) + 1) * interval

    def cache_put(i: int, tokens: int) -> None:
        capb = max(0, pool - kv) // block
        assert cache is not None  # (called only with a prefix cache)
        if hashes is not None:
            cache.put_hashes(hashes[i][: tokens // block], capb)
        else:
            cache.put_session(session[i], tokens, capb)

    def emit(ts: float, run_: int, wait_: int, kv_: int) -> None:
        nonlocal acc_prompt, acc_gen, acc_pre, acc_new, prev_active
        active = bool(acc_prompt or acc_gen)
        if active or prev_active or run_ or wait_:
            stats.extend((ts, run_, wait_, kv_, acc_prompt, acc_gen, acc_pre, acc_new, hit_sum, query_sum))
        prev_active = active
        acc_prompt = acc_gen = acc_pre = acc_new = 0

    def preempt_newest() -> None:
        nonlocal kv, dec_tok, n_dec, nrun, acc_pre
        i = next(reversed(order))
        del order[i]
        nrun -= 1
        if state[i] == 1:
            pf.remove(i)
            held = ptot[i]
        else:
            gen[i] += g - join_g[i]
            held = prompt[i] + gen[i]
            dec_tok -= held
            n_dec -= 1
        kv -= held
        state[i] = 0
        ptot[i] = prompt[i] + gen[i]  # recompute: the output so far is prefilled again
        npre[i] += 1
        acc_pre += 1
        waiting.appendleft(i)
        if cache is not None:
            cache_put(i, ptot[i])

    while True:
        if nrun == 0 and not waiting:
            if i_next >= n_req:
                break
            a = t_arr[i_next]
            while next_b <= a:  # idle until the next arrival
                emit(next_b, 0, 0, kv)
                next_b += interval
            t = max(t, a)
            while i_next < n_req and t_arr[i_next] <= t:
                waiting.append(i_next)
                i_next += 1
        iterations += 1
        n_pre = 0
        # Step kind: mixed steps decode everyone and prefill with what is left of the budget; in
        # prefill_first mode a step prefills if anything can be prefilled, else it decodes.
        if mixed:
            decode = n_dec > 0
        else:
            head_ok = bool(waiting) and nrun < cap and kv + ptot[waiting[0]] + n_dec + 1 <= pool
            decode = not pf and not head_ok
        if decode:
            while kv + n_dec > pool:
                preempt_newest()
                n_pre += 1
        budget = budget_max - n_dec if decode and mixed else (0 if decode else budget_max)
        # Prefill chunks: running prefills first, then FCFS admission while the budget lasts.
        p_tokens = 0
        p_cost = 0.0  # prefill tokens weighted by the long-prefill factor (equal to p_tokens without one)
        attn = 0.0
        chunks: list[tuple[int, int]] = []
        for r in pf:
            if budget <= 0:
                break
            c = rem[r] if rem[r] < budget else budget
            budget -= c
            chunks.append((r, c))
        new_seqs = new_tok = new_cached = 0
        while waiting and budget > 0 and nrun < cap:
            h = waiting[0]
            need = ptot[h]
            if kv + need + n_dec + 1 > pool:  # keep room for one more decode step of everyone
                break
            waiting.popleft()
            state[h] = 1
            order[h] = None
            nrun += 1
            kv += need
            # At least the last prompt token is computed (its logits give the first output token); a
            # simulated cache hits whole blocks only, so a block-aligned prompt loses its last block.
            if given[h] >= 0:
                hit = min(given[h], need - 1)
            elif cache is not None:
                limit = (need - 1) // block * block
                hit = (
                    cache.hit_hashes(hashes[h], limit)
                    if hashes is not None
                    else cache.hit_session(session[h], limit)
                )
            else:
                hit = 0
            if admitted[h] != admitted[h]:
                admitted[h] = t
                cached[h] = hit
            rem[h] = need - hit
            hits_win.append((hit, need))
            hit_sum += hit
            query_sum += need
            if len(hits_win) > HIT_WINDOW:
                oh, oq = hits_win.popleft()
                hit_sum -= oh
                query_sum -= oq
            new_seqs += 1
            new_cached += hit
            pf.append(h)
            c = rem[h] if rem[h] < budget else budget
            budget -= c
            new_tok += c
            chunks.append((h, c))
        for r, c in chunks:
            f = long_scale if long_min and ptot[r] > long_min else 1.0
            p_tokens += c
            p_cost += c * f
            attn += c * (ptot[r] - rem[r] + c / 2) * f
        b_step = n_dec if decode else 0
        alpha = base + p_tok * p_cost + p_attn * attn + (d_seq * n_dec + d_tok * dec_tok if decode else 0.0)
        beta = d_tok * n_dec if decode else 0.0
        # How many identical steps follow? One partial chunk that uses the whole budget repeats until
        # fewer tokens than a chunk remain; decoders repeat until one finishes or KV runs out.
        if not chunks and not decode:
            raise RuntimeError("simulator stalled: nothing to prefill or decode (a bug, please report)")
        n = 1 << 62
        if chunks:
            if len(chunks) == 1 and chunks[0][1] < rem[chunks[0][0]]:
                r, c = chunks[0]
                n = rem[r] // c
                beta += p_attn * c * c * (long_scale if long_min and ptot[r] > long_min else 1.0)
            else:
                n = 1
        if decode:
            while heap and (state[heap[0][1]] != 2 or fin_g[heap[0][1]] != heap[0][0]):
                heapq.heappop(heap)
            if heap:
                n = min(n, heap[0][0] - g)
            n = min(n, (pool - kv) // n_dec)
        # An arrival changes the next step only if it could be admitted then.
        if n > 1 and i_next < n_req and not waiting and nrun < cap and (budget > 0 or (decode and not mixed)):
            d_arr = t_arr[i_next] - t
            if (n - 1) * alpha + beta * (n - 1) * (n - 2) / 2 >= d_arr:
                k = _fit(alpha, beta, d_arr)
                n = min(n, k + 1 if _f(alpha, beta, k) < d_arr else max(k, 1))
        dur = n * alpha + beta * n * (n - 1) / 2
        if dur > next_b - t:
            nb = _fit(alpha, beta, next_b - t)
            n = 1 if nb == 0 else min(n, nb)
            dur = n * alpha + beta * n * (n - 1) / 2
        t_end = t + dur
        run0, wait0, kv0 = nrun, len(waiting), kv
        total_steps += n
        gen_tokens = 0
        if decode:
            g += n
            kv += n * n_dec
            dec_tok += n * n_dec
            gen_tokens = n * n_dec
        done_pf = []
        for r, c in chunks:
            rem[r] -= c * n if len(chunks) == 1 else c
            if rem[r] == 0:
                done_pf.append(r)
        prompt_tokens = p_tokens * n
        for r in done_pf:
            pf.remove(r)
            gen[r] += 1
            gen_tokens += 1
            kv += 1
            if first[r] != first[r]:
                first[r] = t_end
            if gen[r] >= out[r]:
                state[r] = 3
                fin[r] = t_end
                kv -= prompt[r] + out[r]
                nrun -= 1
                del order[r]
                if cache is not None:
                    cache_put(r, prompt[r] + out[r])
            else:
                state[r] = 2
                n_dec += 1
                join_g[r] = g
                fin_g[r] = g + out[r] - gen[r]
                dec_tok += ptot[r] + 1
                heapq.heappush(heap, (fin_g[r], r))
        if decode:
            while heap and heap[0][0] <= g:
                fg, r = heapq.heappop(heap)
                if state[r] != 2 or fin_g[r] != fg:
                    continue
                state[r] = 3
                fin[r] = t_end
                held = prompt[r] + out[r]
                kv -= held
                dec_tok -= held
                n_dec -= 1
                nrun -= 1
                del order[r]
                if cache is not None:
                    cache_put(r, held)
        wait_area = wait0 * dur
        while i_next < n_req and t_arr[i_next] <= t_end:
            waiting.append(i_next)
            wait_area += t_end - t_arr[i_next]
            i_next += 1
        if record:
            steps.extend((t, n, dur, alpha, beta, run0, wait0, p_tokens, len(chunks), b_step, new_seqs, new_tok,
                          new_cached, kv0, n_pre, wait_area))  # fmt: skip
        while next_b < t_end:  # only a single step can straddle a boundary: it counts after it
            emit(next_b, run0, wait0, kv0)
            next_b += interval
        acc_prompt += prompt_tokens
        acc_gen += gen_tokens
        acc_new += new_seqs
        if next_b == t_end:
            emit(next_b, nrun, len(waiting), kv)
            next_b += interval
        t = t_end
    emit(next_b, nrun, len(waiting), kv)
    return {
        "admitted": np.array(admitted),
        "first": np.array(first),
        "finished": np.array(fin),
        "cached": np.array(cached, dtype=np.int64),
        "preemptions": np.array(npre, dtype=np.int64),
        "steps": _columns(steps, STEP_FIELDS) if record else None,
        "stats": _columns(stats, STAT_FIELDS),
        "iterations": iterations,
        "total_steps": total_steps,
    }

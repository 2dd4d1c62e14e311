"""The seeded workload generator: reproducible, shares, on/off windows, abandonment, prefix groups, validation."""

from __future__ import annotations

import numpy as np
import pytest

from sim import ClientSpec, WorkloadSpec
from sim.config import MAX_VALUE, FieldError
from sim.workload import MIN_RATE, TooFewArrivals, client_rates, generate, workload_from_dict

TWO_CLIENTS = (ClientSpec("A", share=0.75), ClientSpec("B", share=0.25))


def test_same_seed_same_requests_other_seed_other_requests():
    spec = WorkloadSpec(num_requests=200, clients=TWO_CLIENTS, abandon_rate=0.3, seed=42)
    assert generate(spec) == generate(spec)
    assert generate(spec) != generate(spec.replace(seed=43))


def test_generated_requests_are_well_formed():
    reqs = generate(WorkloadSpec(num_requests=500, prompt_max=300, output_max=100, seed=1))
    assert len(reqs) == 500
    assert [r.request_id for r in reqs] == [f"r{i}" for i in range(500)]  # one client: r0, r1, ...
    arrivals = np.array([r.arrival_step for r in reqs])
    assert (np.diff(arrivals) >= 0).all()  # in arrival order
    assert all(1 <= r.prompt_len <= 300 and 1 <= r.output_len <= 100 for r in reqs)


def test_shares_are_respected_over_2000_requests():
    # Shares 0.75 / 0.25: the binomial sd over 2,000 requests is sqrt(0.75 x 0.25 / 2000) ~ 0.0097; allow 3 sd.
    reqs = generate(WorkloadSpec(num_requests=2000, clients=TWO_CLIENTS, seed=7))
    share_a = sum(r.client_id == "A" for r in reqs) / len(reqs)
    assert abs(share_a - 0.75) < 0.03
    assert {r.request_id.split("-")[0] for r in reqs} == {"A", "B"}  # ids name the client


def test_client_rates_split_the_total_rate_by_share_unless_given():
    spec = WorkloadSpec(rate_per_step=0.8, clients=(ClientSpec("A", share=3), ClientSpec("B", share=1),
                                                    ClientSpec("C", rate_per_step=0.1)))
    # A and B split 0.8 as 3:1 -> 0.6 and 0.2; C has its own 0.1.
    assert client_rates(spec).tolist() == pytest.approx([0.6, 0.2, 0.1])


def test_mean_arrival_rate_matches():
    # 2,000 arrivals at 0.5 per step span about 4,000 steps (Poisson: sd of the span ~ sqrt(2000) / 0.5 ~ 89).
    reqs = generate(WorkloadSpec(num_requests=2000, rate_per_step=0.5, seed=3))
    assert abs(reqs[-1].arrival_step - 4000) < 4 * 89


def test_on_off_windows_and_start_step_are_respected():
    # B sends from step 100: 20 steps on, 30 off, repeating; it stops for good at step 1,000.
    clients = (ClientSpec("A", share=0.5), ClientSpec("B", share=0.5, start_step=100, on_steps=20, off_steps=30,
                                                       stop_step=1000))
    reqs = generate(WorkloadSpec(num_requests=1500, rate_per_step=1.0, clients=clients, seed=5))
    b = np.array([r.arrival_step for r in reqs if r.client_id == "B"])
    assert len(b) > 100
    assert (b >= 100).all() and (b < 1000).all()
    assert ((b - 100) % 50 < 20).all()
    a = np.array([r.arrival_step for r in reqs if r.client_id == "A"])
    assert ((a - 100) % 50 >= 20).any()  # A is not windowed


def test_abandon_rate_and_abort_steps():
    # 30% of 2,000 abandon (binomial sd ~ 0.010); each leaves before its answer could be complete, even if it
    # started at once: abort in [arrival, arrival + output_len - 1] (round() alone reached arrival + output_len).
    reqs = generate(WorkloadSpec(num_requests=2000, abandon_rate=0.3, seed=11))
    abandoned = [r for r in reqs if r.abort_step is not None]
    assert abs(len(abandoned) / len(reqs) - 0.3) < 0.03
    assert all(r.arrival_step <= r.abort_step < r.arrival_step + r.output_len for r in abandoned)
    short = generate(WorkloadSpec(num_requests=500, output_median=2, output_sigma=0.0, abandon_rate=1.0,
                                  abandon_point="late", seed=3))
    assert {r.abort_step - r.arrival_step for r in short} == {0, 1}
    assert not any(r.abort_step is not None for r in generate(WorkloadSpec(num_requests=200, seed=11)))


def test_abandon_point_early_and_late():
    # Beta(1, 3) has mean 1/4, Beta(3, 1) mean 3/4 of the answer.
    def mean_fraction(point):
        reqs = generate(WorkloadSpec(num_requests=2000, abandon_rate=1.0, abandon_point=point, seed=2))
        return np.mean([(r.abort_step - r.arrival_step) / r.output_len for r in reqs])
    assert mean_fraction("early") == pytest.approx(0.25, abs=0.03)
    assert mean_fraction("late") == pytest.approx(0.75, abs=0.03)


def test_clients_that_send_in_short_bursts_still_get_all_their_requests():
    # Both clients on 10 steps in 1,000 (1%): 300 requests at 0.5 a step take ~60,000 steps, and the windows repeat
    # forever, so the generator waits for them (it gave up after ~31,000 steps, "allowing only 166 of 300").
    bursts = tuple(ClientSpec(c, on_steps=10, off_steps=990) for c in "AB")
    reqs = generate(WorkloadSpec(num_requests=300, rate_per_step=0.5, clients=bursts, seed=0))
    assert len(reqs) == 300
    assert all(r.arrival_step % 1000 < 10 for r in reqs)


def test_prefix_groups_are_per_client():
    reqs = generate(WorkloadSpec(num_requests=300, clients=TWO_CLIENTS, prefix_len=32, prompt_max=100, seed=4))
    for r in reqs:
        assert r.prefix_group == f"{r.client_id}-system" and r.prefix_len == 32
        assert 33 <= r.prompt_len <= 132  # the shared 32 tokens + the request's own 1..100
    assert all(r.prefix_group is None and r.prefix_len == 0 for r in generate(WorkloadSpec(num_requests=20)))


def test_lengths_with_zero_sigma_are_the_median():
    reqs = generate(WorkloadSpec(num_requests=50, prompt_median=37, prompt_sigma=0.0, output_median=11,
                                 output_sigma=0.0, clients=(ClientSpec("A", output_median=5), ClientSpec("B"))))
    assert {r.prompt_len for r in reqs} == {37}
    assert {r.output_len for r in reqs if r.client_id == "A"} == {5}  # the client's own median wins
    assert {r.output_len for r in reqs if r.client_id == "B"} == {11}


def test_client_priority_is_copied():
    reqs = generate(WorkloadSpec(num_requests=100, clients=(ClientSpec("A", priority=2), ClientSpec("B"))))
    assert {r.priority for r in reqs if r.client_id == "A"} == {2}


@pytest.mark.parametrize(("make", "field"), [
    (lambda: WorkloadSpec(num_requests=0), "workload.num_requests"),
    (lambda: WorkloadSpec(rate_per_step=0.0), "workload.rate_per_step"),
    (lambda: WorkloadSpec(prompt_median=0), "workload.prompt_median"),
    (lambda: WorkloadSpec(output_sigma=-1.0), "workload.output_sigma"),
    (lambda: WorkloadSpec(prompt_max=0), "workload.prompt_max"),
    (lambda: WorkloadSpec(abandon_rate=1.5), "workload.abandon_rate"),
    (lambda: WorkloadSpec(abandon_point="middle"), "workload.abandon_point"),
    (lambda: WorkloadSpec(prefix_len=-1), "workload.prefix_len"),
    (lambda: WorkloadSpec(seed=-1), "workload.seed"),
    (lambda: WorkloadSpec(generator="bursty"), "workload.generator"),
    (lambda: WorkloadSpec(clients=()), "workload.clients"),
    (lambda: WorkloadSpec(clients=(ClientSpec("A"), ClientSpec("A"))), "workload.clients: client ids must be unique"),
    (lambda: WorkloadSpec(clients=(ClientSpec("A", share=0),)), "workload.clients: at least one client"),
    (lambda: WorkloadSpec(clients=(ClientSpec("A", rate_per_step=0.0),)), "workload.clients: at least one client"),
    (lambda: ClientSpec("A", share=-1), "clients[A].share"),
    (lambda: ClientSpec("A", rate_per_step=-0.1), "clients[A].rate_per_step"),
    (lambda: ClientSpec("A", start_step=10, stop_step=10), "clients[A].stop_step"),
    (lambda: ClientSpec("A", on_steps=-1), "clients[A].on_steps"),
    (lambda: ClientSpec(""), "workload.clients.client_id: must be a non-empty string"),
    (lambda: workload_from_dict({"seeds": 1}), "workload: unknown key 'seeds'"),
    (lambda: workload_from_dict({"clients": []}), "workload.clients: must be a non-empty list"),
    (lambda: generate(WorkloadSpec(num_requests=100, clients=(ClientSpec("A", stop_step=3),))),
     "workload.clients: the clients' windows close by step 3 (stop_step) after only"),
])
def test_invalid_specs_raise_value_error_naming_the_field(make, field):
    with pytest.raises(ValueError) as err:
        make()
    assert field in str(err.value)


def test_a_late_start_costs_nothing_to_generate(monkeypatch):
    # The arrival clock starts at the first client's start_step: one batch of draws for 10 requests, where
    # starting at step 0 drew ~10**7 / 64 batches of arrivals that all fell before the start.
    batches = []
    real_rng = np.random.default_rng

    class CountingRng:
        def __init__(self, seed):
            self._rng = real_rng(seed)

        def exponential(self, *args, **kwargs):
            batches.append(1)
            return self._rng.exponential(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self._rng, name)

    monkeypatch.setattr(np.random, "default_rng", CountingRng)
    reqs = generate(WorkloadSpec(num_requests=10, clients=(ClientSpec("A", start_step=10**7),), seed=1))
    assert min(r.arrival_step for r in reqs) >= 10**7 and len(batches) == 1
    early = generate(WorkloadSpec(num_requests=10, clients=(ClientSpec("A"), ClientSpec("B", start_step=50)), seed=1))
    assert min(r.arrival_step for r in early) < 50  # one client from step 0: the clock starts there


@pytest.mark.timeout(30)  # (a hang guard: these drew arrivals for hours)
@pytest.mark.parametrize("clients", [
    # 1,000 requests a step until step 1, then a client that sends one request in a million steps
    (ClientSpec("a", rate_per_step=1000.0, stop_step=1), ClientSpec("b", rate_per_step=1e-6)),
    # on for 1 step in every 10**9
    (ClientSpec("a", rate_per_step=1000.0, on_steps=1, off_steps=10**9),),
])
def test_windows_that_let_almost_nothing_through_are_an_error_not_a_hang(clients):
    with pytest.raises(ValueError, match=r"workload.clients: the clients' on/off windows let through only \d+ of 2000 "
                                         r"requests in [\d,]+ Poisson arrivals .*; widen them or lower num_requests"):
        generate(WorkloadSpec(num_requests=2000, clients=clients, seed=1))


# ---- errors as data (sim.config.FieldError): a page words them from these fields, never from the text ----------
def _error(make) -> FieldError:
    with pytest.raises(FieldError) as err:
        make()
    return err.value


def test_a_range_error_carries_the_field_the_range_and_the_value():
    e = _error(lambda: WorkloadSpec(num_requests=0))
    assert (e.name, e.within, e.field, e.item, e.value, e.lo, e.hi) == (
        "num_requests", "workload", "workload.num_requests", None, 0, 1, 200_000)
    assert str(e) == "workload.num_requests: must be between 1 and 200000, got 0"  # (made from them)
    e = _error(lambda: WorkloadSpec(rate_per_step=0.0))
    assert (e.name, e.value, e.lo, e.hi, e.lo_open, e.hi_open) == ("rate_per_step", 0.0, MIN_RATE, 1000.0, False, False)
    e = _error(lambda: WorkloadSpec(abandon_point="middle"))
    assert (e.name, e.value, e.choices) == ("abandon_point", "middle", ("uniform", "early", "late"))


def test_a_clients_error_says_which_client():
    e = _error(lambda: ClientSpec("B", start_step=10, stop_step=10))
    assert (e.name, e.item, e.value, e.lo, e.hi) == ("stop_step", "B", 10, 11, None)
    assert e.field == "workload.clients[B].stop_step"
    e = _error(lambda: ClientSpec("A", on_steps=10**13))  # (past the simulator's limit: the range says so)
    assert (e.name, e.lo, e.hi) == ("on_steps", 0, MAX_VALUE)


def test_too_few_arrivals_carries_its_figures():
    e = _error(lambda: generate(WorkloadSpec(num_requests=100, clients=(ClientSpec("A", stop_step=3),))))
    assert isinstance(e, TooFewArrivals) and e.field == "workload.clients"
    assert (e.closed, e.until_step, e.num_requests, e.num_drawn) == (True, 3, 100, None) and e.num_arrived < 100
    assert str(e) == (f"workload.clients: the clients' windows close by step 3 (stop_step) after only {e.num_arrived} "
                      f"of 100 requests; widen them or lower num_requests")
    e = _error(lambda: generate(WorkloadSpec(num_requests=2000, seed=1, clients=(
        ClientSpec("a", rate_per_step=1000.0, on_steps=1, off_steps=10**9),))))
    assert not e.closed and e.num_drawn is not None and e.num_arrived < 2000


def test_an_error_seen_from_outside_and_across_processes_keeps_its_fields():
    import pickle

    e = _error(lambda: ClientSpec("A", share=-1))
    outer = e.at("scenario")
    assert outer.field == "scenario.workload.clients[A].share" and str(outer).startswith(outer.field + ": must be")
    assert e.field == "workload.clients[A].share"  # (the original is unchanged)
    for error in (e, _error(lambda: generate(WorkloadSpec(num_requests=100, clients=(ClientSpec("A", stop_step=3),))))):
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and again.__dict__ == error.__dict__ and str(again) == str(error)

"""The defect classes found on independently built cases, on generated cases (hypothesis).

``test_labels_defects.py`` pins each defect with one hand-built fixture; here each class is
generated in many shapes (names and methods as real lists and explorers spell them, sizes,
amounts, swap rates) and every generated case must come out right. (The fourth class, ethereum-etl
token transfers without times, is covered in both load orders in loaders/test_loaders_etl.py.)
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tahrix_lab.case.labels import load_labels
from tahrix_lab.case.loaders import load_file
from tahrix_lab.case.tracing import trace_funds
from tests.case.test_labels_defects import NORMAL_HEADER, a, dust_flags

SETTINGS = settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# name tags and methods as Etherscan and the eth-labels lists spell them
DISTRIBUTOR_TAGS = ["CoinTool: MultiSender", "Uniswap: Merkle Distributor", "Optimism: Airdrop",
                    "Disperse.app", "Gnosis: Bulk Sender", "1inch: Airdrop Distributor"]  # fmt: skip
DISTRIBUTION_METHODS = ["Multisend Token", "multisendEther", "Disperse Ether", "Airdrop", "Batch Transfer",
                        "bulkSend"]  # fmt: skip
OTHER_METHODS = ["Swap", "Deposit", "Execute", "Transfer", "Approve", "Claim Rewards"]
GENERIC_SLUGS = ["defi", "dex", "lending", "yield-farming", "uniswap"]  # generic: not a distributor category


@SETTINGS
@given(
    tag=st.sampled_from(DISTRIBUTOR_TAGS),
    method=st.sampled_from(DISTRIBUTION_METHODS),
    other=st.sampled_from(OTHER_METHODS),
    slug=st.sampled_from(GENERIC_SLUGS),
    recipients=st.integers(10, 30),
    usd=st.floats(0.01, 0.99),
    upper=st.booleans(),
)
def test_generated_distributions_are_never_dust_and_real_dust_still_is(
    build: Any, tmp_path_factory: Any, tag: str, method: str, other: str, slug: str, recipients: int, usd: float,
    upper: bool,
) -> None:  # fmt: skip
    b = build()
    named, router, plain, duster = (a(0x1000 + i + 16 * len(b.case_id)) for i in range(4))
    # dust is one transaction fanning out to many: each sender's sends share one transaction
    for i in range(recipients):
        b.transfer(named, a(0x2000 + i), usd, 0, tx="0xnamed")
        b.transfer(router, a(0x3000 + i), usd, 1, tx="0xmulti")
        b.transfer(plain, a(0x4000 + i), usd, 2, tx="0xplain")
        b.transfer(duster, a(0x5000 + i), usd, 3, tx="0xdust")
    b.tx("0xmulti", a(0x6000), router, 1)
    b.tx("0xplain", a(0x6001), plain, 2)
    cid = b.done()
    for tx, name in (("0xmulti", method), ("0xplain", other)):
        b.db.cursor().execute("UPDATE transactions SET method_name = ? WHERE case_id = ? AND tx_hash = ?",
                              [name, cid, tx])  # fmt: skip

    def spell(x: str) -> str:  # the lists write checksummed or upper-case hex as often as lower
        return "0x" + x[2:].upper() if upper else x

    lst = tmp_path_factory.mktemp("labels") / "accounts.csv"
    lst.write_text("address,chainId,label,nameTag\n"
                   f'"{spell(named)}",1,"{slug}","{tag}"\n"{spell(router)}",1,"{slug}","Protocol X: Router"\n'
                   f'"{spell(plain)}",1,"{slug}","Protocol Y: Vault"\n')  # fmt: skip
    assert load_labels(b.db, [lst]).files[0].bad == []
    assert dust_flags(b, cid) == {plain, duster}


@SETTINGS
@given(
    stolen=st.integers(10_000, 5_000_000),
    swap_cost=st.floats(0.001, 0.05),
    to_exchange=st.floats(0.1, 0.9),
    hops=st.integers(0, 2),
)
def test_generated_swaps_keep_every_dollar_on_the_trail(
    build: Any, stolen: int, swap_cost: float, to_exchange: float, hops: int
) -> None:
    """Stolen tokens into a DEX router, native back by an internal transfer, through 0-2 hops, then split
    between an exchange and a mixer: both endpoints reached, each with its share, nothing counted twice."""
    b = build()
    victim, thief, router, ex, mixer = a(0x11), a(0x12), a(0x13), a(0x14), a(0x15)
    token = "ethereum:" + a(0x99)
    back = round(stolen * (1 - swap_cost), 2)
    b.transfer(victim, thief, stolen, 0, asset=token, tx="0xsteal")
    b.transfer(thief, router, stolen, 10, asset=token, tx="0xswap")
    b.transfer(router, thief, back, 10, tx="0xswap")
    b.transfers[-2]["kind"], b.transfers[-1]["kind"] = "token", "internal"
    holder = thief
    for h in range(hops):
        nxt = a(0x700 + h)
        b.transfer(holder, nxt, back, 20 + h, tx=f"0xhop{h}")
        holder = nxt
    cash = round(back * to_exchange, 2)
    b.transfer(holder, ex, cash, 30, tx="0xcashout")
    b.transfer(holder, mixer, round(back - cash, 2), 40, tx="0xmix")
    b.label(router, "dex")
    b.label(ex, "exchange")
    b.label(mixer, "mixer")
    cid = b.done()
    summary = trace_funds(b.db, cid, [victim])["summary"]
    by_cat = summary["endpoint_usd_by_category"]
    assert by_cat["exchange"] == cash and by_cat["mixing_service"] == round(back - cash, 2)
    assert summary["traced_usd"] == round(
        summary["endpoints_usd"] + summary["frontier_usd"] + summary["held_usd"] + summary["cut_off_usd"], 2
    )
    assert summary["endpoints_usd"] <= stolen  # the swapped value is one trail, not two


@SETTINGS
@given(
    methods=st.lists(
        st.one_of(
            st.binary(min_size=4, max_size=4).map(lambda x: "0x" + x.hex()),
            st.binary(min_size=4, max_size=4).map(lambda x: "0x" + x.hex().upper()),
            st.sampled_from([*DISTRIBUTION_METHODS, *OTHER_METHODS, "", "0x12", "0x"]),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_generated_method_columns_keep_selectors_apart_from_names(
    case_db: Any, tmp_path_factory: Any, methods: list[str]
) -> None:
    def row(n: int, method: str) -> list[str]:
        return [f"0x{n:064x}", str(19_000_000 + n), str(1_710_000_000 + n), "2024-03-09 16:00:00", a(1), a(2), "",
                "0", "0.5", "1500", "0.001", "3", "3000", "", "", method]  # fmt: skip

    cid = f"C-GEN-{len(methods)}-{abs(hash(tuple(methods))) % 10**9}"
    f = tmp_path_factory.mktemp("ex") / "normal.csv"
    f.write_text("\n".join(",".join(json.dumps(x) for x in r) for r in [NORMAL_HEADER] +
                           [row(n, m) for n, m in enumerate(methods, 1)]) + "\n")  # fmt: skip
    load_file(case_db, cid, f)
    got = case_db.rows(
        "SELECT tx_hash, method_selector, method_name FROM transactions WHERE case_id = ? ORDER BY tx_hash",
        [cid],
    )
    for r, m in zip(got, methods, strict=True):
        is_selector = len(m) == 10 and m[:2] == "0x" and all(c in "0123456789abcdefABCDEF" for c in m[2:])
        want = (m.lower(), None) if is_selector else (None, m or None)
        assert (r["method_selector"], r["method_name"]) == want, m

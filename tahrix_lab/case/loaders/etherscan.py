"""Etherscan-family CSV exports (Etherscan, BscScan, PolygonScan, Arbiscan,
Optimism, Basescan, Snowtrace): normal, internal, ERC-20, ERC-721, ERC-1155
and token-page exports, recognised by their header.

Quirks taken as they come: ``Txhash`` or ``Transaction Hash``; ``Value_IN(ETH|BNB|MATIC|POL|AVAX)``;
``Historical $Price/Eth`` or ``/ETH``; thousands separators and ``$``; ``N/A``
or empty is unknown (NULL), never zero. Native and internal values are priced
from the file's historical price column; token amounts are exact base units
when the decimals are known (``assets``, the shipped table of well-known
tokens), otherwise ``amount_raw`` stays NULL and the row is counted as having
unknown decimals. Token exports have no log index: identity is the canonical
key of ``merge.py``.
"""

from __future__ import annotations

import re

import duckdb

from tahrix_lab.case.chains import CHAINS, chains_for_symbol, resolve_chain
from tahrix_lab.case.loaders.csvfile import Staged, first_bad
from tahrix_lab.case.loaders.report import FileReport, LoadError
from tahrix_lab.case.loaders.sqlparts import DECIMAL_RE, INTEGER_RE, lit, number, raw_from_decimal, text

_HASH_KEYS = ("txhash", "transactionhash", "hash")
_TOKEN_IN_NAME = re.compile(r"0x[0-9a-fA-F]{40}")


def export_kind(keys: set[str]) -> str | None:
    """Which Etherscan export a header is, or ``None``."""
    if not keys & set(_HASH_KEYS[:2]) or not keys & {"blockno", "unixtimestamp", "datetime(utc)", "datetime"}:
        return None
    if "contractaddress" not in keys and ("quantity" in keys or "tokenid" in keys):
        return "token-page"
    if "tokenid" in keys:
        return "erc1155" if keys & {"tokenvalue", "quantity", "tokenquantity"} else "erc721"
    if "tokenvalue" in keys:
        return "erc20"
    if "parenttxfrom" in keys or "txto" in keys:
        return "internal"
    if any(k.startswith("valuein(") for k in keys):
        return "normal"
    return None


def _chain_for(st: Staged, chain: str | None) -> tuple[str, str | None]:
    """The chain (registry name) and the native symbol the header names."""
    key = st.key_starting("valuein(")
    symbol = key[len("valuein(") : -1].upper() if key else None
    if chain is not None:
        name = resolve_chain(chain)
        if symbol and symbol not in CHAINS[name].export_symbols:
            raise LoadError(
                st.file, f"this export's native asset is {symbol}, but chain {name!r} has "
                f"{'/'.join(CHAINS[name].export_symbols)}: give the chain of the explorer it came from",
                line=1, column=st.name(key or ""),
            )  # fmt: skip
        return name, symbol
    candidates = chains_for_symbol(symbol) if symbol else []
    return (candidates[0] if candidates else "ethereum"), symbol


def _time_sql(st: Staged) -> str:
    unix = st.col("unixtimestamp")
    dt = st.col("datetime(utc)", "datetime")
    parts = []
    if unix:
        parts.append(
            f"CASE WHEN regexp_full_match({text(unix)}, '[0-9]+') THEN epoch_ms(CAST({text(unix)} AS BIGINT) * 1000) END"
        )
    if dt:
        parts.append(
            f"coalesce(TRY_CAST({text(dt)} AS TIMESTAMP), try_strptime({text(dt)}, "
            "['%m/%d/%Y %H:%M:%S', '%m/%d/%Y %H:%M', '%m/%d/%y %H:%M', '%d/%m/%Y %H:%M:%S']))"
        )
    if not parts:
        raise LoadError(
            st.file, "no time column (UnixTimestamp or DateTime (UTC))", line=1, column="UnixTimestamp"
        )
    return f"coalesce({', '.join(parts)})"


def _common_checks(st: Staged, chain: str, time: str) -> list[tuple[str, str, str]]:
    h = st.need(*_HASH_KEYS)
    checks = [
        (st.name(*_HASH_KEYS), f"NOT coalesce(regexp_full_match({text(h)}, '0x[0-9a-fA-F]{{64}}'), FALSE)",
         "{value} is not a transaction hash"),
        (st.name("unixtimestamp", "datetime(utc)", "datetime"), f"({time}) IS NULL", "{value} is not a time"),
    ]  # fmt: skip
    if CHAINS[chain].family == "evm":
        for k in ("from", "to", "txto", "contractaddress", "parenttxfrom", "parenttxto"):
            c = st.col(k)
            if c:
                checks.append((st.name(k), f"{text(c)} IS NOT NULL AND NOT regexp_full_match({text(c)}, '0x[0-9a-fA-F]{{40}}')",
                               "{value} is not an address"))  # fmt: skip
    block = st.col("blockno", "blocknumber")
    if block:
        checks.append((st.name("blockno", "blocknumber"), f"{number(block)} IS NOT NULL AND NOT regexp_full_match({number(block)}, '{INTEGER_RE}')",
                       "{value} is not a block number"))  # fmt: skip
    return checks


def _num_check(st: Staged, key: str, pattern: str = DECIMAL_RE) -> tuple[str, str, str]:
    c = st.need(key)
    return (st.name(key), f"{number(c)} IS NOT NULL AND NOT regexp_full_match({number(c)}, '{pattern}')",
            "{value} is not a number")  # fmt: skip


def _addr(st: Staged, *keys: str) -> str:
    c = st.col(*keys)
    return f"lower({text(c)})" if c else "NULL"


def _dec(expr: str | None) -> str:
    return f"TRY_CAST({number(expr)} AS DECIMAL(38,18))" if expr else "NULL"


def _per_file(cur: duckdb.DuckDBPyConnection, sql: str) -> dict[int, tuple[int, ...]]:
    """``sql`` selects ``_f`` and counts, grouped by ``_f``."""
    return {int(r[0]): tuple(int(v or 0) for v in r[1:]) for r in cur.execute(sql).fetchall()}


def stage_etherscan(
    cur: duckdb.DuckDBPyConnection,
    st: Staged,
    reports: list[FileReport],
    *,
    chain: str | None,
    token: str | None,
    base: int = 0,
) -> str:
    """Fill ``_mv``/``_tx``/``_as`` from staged Etherscan exports of one layout (``reports[i]`` is the
    report of ``st.files[i]``; their rows get ``_file = base + i``); return the chain."""
    kind = export_kind(set(st.keys))
    if kind is None:  # the caller recognised it; a guard for direct calls
        raise LoadError(st.file, "not an Etherscan-family export", line=1)
    chain, symbol = _chain_for(st, chain)
    for fr in reports:
        fr.format = f"etherscan {kind} ({chain})"
    time = _time_sql(st)
    checks = _common_checks(st, chain, time)
    h = f"lower({text(st.need(*_HASH_KEYS))})"
    block = (
        f"TRY_CAST({number(st.col('blockno', 'blocknumber'))} AS BIGINT)"
        if st.col("blockno", "blocknumber")
        else "NULL"
    )
    cols = f"_f, _f + {int(base)} AS _file, {lit(chain)} AS chain, {h} AS tx_hash, {time} AS block_time"
    native_dec = CHAINS[chain].native_decimals
    if kind in ("normal", "internal"):
        _stage_native(
            cur,
            st,
            reports,
            kind,
            chain,
            symbol or CHAINS[chain].native_symbol,
            cols,
            block,
            checks,
            native_dec,
        )
        return chain
    contract = _token_contract(st, token)
    _stage_tokens(cur, st, reports, kind, chain, contract, cols, block, checks)
    return chain


# Etherscan's Method column holds the method's name when Etherscan knows it, else the raw
# four-byte selector (``0xa9059cbb``): that is a selector, not a name.
_SELECTOR = "coalesce(regexp_full_match(method, '0x[0-9a-fA-F]{8}'), FALSE)"


def _stage_native(
    cur: duckdb.DuckDBPyConnection, st: Staged, reports: list[FileReport], kind: str, chain: str, symbol: str, base: str,
    block: str, checks: list[tuple[str, str, str]], native_dec: int,
) -> None:  # fmt: skip
    vin_key, vout_key = f"valuein({symbol.lower()})", f"valueout({symbol.lower()})"
    vin, vout = st.col(vin_key), st.col(vout_key)
    if vin is None and vout is None:
        raise LoadError(
            st.file,
            f"no Value_IN({symbol}) / Value_OUT({symbol}) column",
            line=1,
            column=f"Value_IN({symbol})",
        )
    checks += [_num_check(st, k) for k in (vin_key, vout_key) if st.col(k)]
    price_key = st.key_starting("historical$price/")
    fee_key = next((k for k in st.keys if k.startswith("txnfee(") and k != "txnfee(usd)"), None)
    for k in (price_key, fee_key, "txnfee(usd)"):
        if k and st.col(k):
            checks.append(_num_check(st, k))
    first_bad(cur, st, checks)
    vin_t, vout_t = (number(vin) if vin else "NULL"), (number(vout) if vout else "NULL")
    # an export row moves value one way: the larger side (a self-send has both equal)
    value_t = f"CASE WHEN coalesce({_dec(vin)}, 0) >= coalesce({_dec(vout)}, 0) THEN coalesce({vin_t}, {vout_t}) ELSE {vout_t} END"
    price = _dec(st.col(price_key)) if price_key else "NULL"
    status_col, err = st.col("status"), st.col("iserror")
    errcode = st.col("errcode")
    if kind == "normal":
        # Error(0): the transaction failed; Error(1): only some internal calls did
        status = f"NOT (coalesce(upper({text(status_col) if status_col else 'NULL'}), '') LIKE 'ERROR(0)%' OR coalesce({text(err) if err else 'NULL'}, '0') = '1')"
        frm, to = _addr(st, "from"), f"coalesce({_addr(st, 'to')}, {_addr(st, 'contractaddress')})"
        tx_from, tx_to, tx_status = frm, to, status
        fee_t = number(st.col(fee_key)) if fee_key else "NULL"
        fee_usd = _dec(st.col("txnfee(usd)"))
        method = text(st.col("method")) if st.col("method") else "NULL"
        mv_kind = "native"
    else:
        failed = f"coalesce({text(err) if err else 'NULL'}, '0') = '1' OR {text(errcode) if errcode else 'NULL'} IS NOT NULL"
        status = f"NOT ({failed})"
        frm, to = _addr(st, "from"), f"coalesce({_addr(st, 'txto', 'to')}, {_addr(st, 'contractaddress')})"
        tx_from, tx_to, tx_status = _addr(st, "parenttxfrom"), _addr(st, "parenttxto"), "NULL"
        fee_t, fee_usd, method, mv_kind = "NULL", "NULL", "NULL", "internal"
    cur.execute(
        f"""CREATE OR REPLACE TEMP TABLE _es AS SELECT _line, {base}, {block} AS block_number, {frm} AS frm, {to} AS dst,
              {value_t} AS value_t, {status} AS ok, {price} AS price, {tx_from} AS tx_from, {tx_to} AS tx_to,
              {tx_status} AS tx_ok, {fee_t} AS fee_t, {fee_usd} AS fee_usd, {method} AS method FROM {st.table}"""
    )
    raw = raw_from_decimal("value_t", str(native_dec))
    fee_raw = raw_from_decimal("fee_t", str(native_dec))
    cur.execute(
        f"""INSERT INTO _tx (chain, tx_hash, block_number, block_time, from_address, to_address, value_raw, value,
              fee_raw, fee, fee_usd, status, method_selector, method_name, source, _line, _file)
            SELECT chain, tx_hash, block_number, block_time, tx_from, tx_to,
                   {raw if mv_kind == "native" else "NULL"}, {"TRY_CAST(value_t AS DECIMAL(38,18))" if mv_kind == "native" else "NULL"},
                   {fee_raw}, TRY_CAST(fee_t AS DECIMAL(38,18)), fee_usd, tx_ok,
                   CASE WHEN {_SELECTOR} THEN lower(method) END, CASE WHEN NOT {_SELECTOR} THEN method END,
                   {lit("etherscan-" + kind)}, _line, _file
            FROM _es"""
    )
    ident = "chain || ':' || tx_hash || ':native:0'" if mv_kind == "native" else "NULL"
    cur.execute(
        f"""INSERT INTO _mv (transfer_id, chain, tx_hash, block_time, kind, from_address, to_address, asset_key,
              amount_raw, amount, usd_value, status, _line, _file)
            SELECT {ident}, chain, tx_hash, block_time, '{mv_kind}', frm, dst, chain || ':native', {raw},
                   TRY_CAST(value_t AS DECIMAL(38,18)), CAST(TRY_CAST(value_t AS DECIMAL(38,18)) AS DOUBLE) * CAST(price AS DOUBLE), ok, _line, _file
            FROM _es WHERE TRY_CAST(value_t AS DECIMAL(38,18)) > 0"""
    )
    for f, zero in _per_file(
        cur,
        "SELECT _f, count(*) FILTER (WHERE value_t IS NULL), count(*) FILTER (WHERE TRY_CAST(value_t AS DECIMAL(38,18)) = 0) "
        "FROM _es GROUP BY _f",
    ).items():
        fr = reports[f]
        fr.skip("value unknown (empty or N/A): no movement recorded", zero[0])
        if mv_kind == "internal":
            fr.skip("internal call moving no value", zero[1])
        if mv_kind == "native" and zero[1]:
            fr.notes.append(f"{zero[1]} transactions move no {symbol} (kept as transactions)")
    cur.execute("DROP TABLE _es")


def _token_contract(st: Staged, token: str | None) -> str | None:
    if st.col("contractaddress"):
        return None
    found = token or (m.group(0) if (m := _TOKEN_IN_NAME.search(st.file.name)) else None)
    if not found or not _TOKEN_IN_NAME.fullmatch(found.strip()):
        raise LoadError(
            st.file, "a token-page export does not say which token it lists: pass token='0x…' "
            "(or keep Etherscan's file name, export-token-0x….csv)", line=1, column="ContractAddress",
        )  # fmt: skip
    return found.strip().lower()


def _stage_tokens(
    cur: duckdb.DuckDBPyConnection, st: Staged, reports: list[FileReport], kind: str, chain: str, contract: str | None,
    base: str, block: str, checks: list[tuple[str, str, str]],
) -> None:  # fmt: skip
    nft = "tokenid" in st.keys
    value_key = next((k for k in ("tokenvalue", "quantity", "tokenquantity", "value") if st.col(k)), None)
    if value_key is None and not nft:
        raise LoadError(st.file, "no TokenValue / Quantity column", line=1, column="TokenValue")
    if value_key:
        checks.append(_num_check(st, value_key))
    usd_key = next((k for k in ("usdvaluedayoftx", "value(usd)", "historicalvalue(usd)") if st.col(k)), None)
    if usd_key:
        checks.append(_num_check(st, usd_key))
    first_bad(cur, st, checks)
    token = lit(contract) if contract else _addr(st, "contractaddress")
    standard = {"erc721": "erc721", "erc1155": "erc1155"}.get(
        kind, "erc721" if nft and not value_key else "erc1155" if nft else "erc20"
    )
    value_t = number(st.col(value_key)) if value_key else "'1'"
    token_id = text(st.col("tokenid")) if nft else "NULL"
    symbol = text(st.col("tokensymbol")) if st.col("tokensymbol") else "NULL"
    name = text(st.col("tokenname")) if st.col("tokenname") else "NULL"
    usd = _dec(st.col(usd_key)) if usd_key and not nft else "NULL"
    cur.execute(
        f"""CREATE OR REPLACE TEMP TABLE _es AS
            SELECT s.*, d.decimals AS dec FROM (
              SELECT _line, {base}, {block} AS block_number, {_addr(st, "from")} AS frm, {_addr(st, "to")} AS dst,
                     {lit(chain)} || ':' || {token} AS asset_key, {token} AS token, {value_t} AS value_t,
                     {token_id} AS token_id, {symbol} AS symbol, {name} AS name, CAST({usd} AS DOUBLE) AS usd
              FROM {st.table}) s LEFT JOIN _decimals d USING (asset_key)"""
    )
    dec = "0" if standard != "erc20" else "dec"
    found = cur.execute(
        f"SELECT _f, min(_line) FROM _es WHERE value_t IS NOT NULL AND {dec} IS NOT NULL AND "
        f"({raw_from_decimal('value_t', dec)}) IS NULL GROUP BY _f ORDER BY _f LIMIT 1"
    ).fetchall()
    if found:
        bad_f, bad = found[0]
        col = st.name(value_key or "tokenvalue")
        value = cur.execute(
            "SELECT value_t, dec FROM _es WHERE _f = ? AND _line = ?", [bad_f, bad]
        ).fetchall()[0]
        raise LoadError(
            st.files[bad_f],
            f"{value[0]!r} has more fraction digits than the token's {value[1] if standard == 'erc20' else 0} decimals",
            record=int(bad),
            column=col,
        )
    cur.execute(
        f"""INSERT INTO _as (_file, asset_key, chain, token_address, symbol, name, decimals, standard)
            SELECT _file, asset_key, chain, token, any_value(symbol), any_value(name), {"any_value(dec)" if standard == "erc20" else "0"}, '{standard}'
            FROM _es GROUP BY ALL"""
    )
    cur.execute(
        f"""INSERT INTO _tx (chain, tx_hash, block_number, block_time, status, source, _line, _file)
            SELECT chain, tx_hash, block_number, block_time, TRUE, {lit("etherscan-" + kind)}, _line, _file FROM _es"""
    )  # a token Transfer log exists only in a transaction that succeeded
    amount = "TRY_CAST(value_t AS DECIMAL(38,18))"
    cur.execute(
        f"""INSERT INTO _mv (chain, tx_hash, block_time, kind, from_address, to_address, asset_key, token_id,
              amount_raw, amount, usd_value, status, _line, _file)
            SELECT chain, tx_hash, block_time, 'token', frm, dst, asset_key, token_id, {raw_from_decimal("value_t", dec)},
                   {amount}, usd, TRUE, _line, _file FROM _es WHERE value_t IS NOT NULL"""
    )
    for f, (unknown,) in _per_file(
        cur, "SELECT _f, count(*) FROM _es WHERE value_t IS NULL GROUP BY _f"
    ).items():
        reports[f].skip("token amount unknown (empty or N/A)", unknown)
    cur.execute("DROP TABLE _es")

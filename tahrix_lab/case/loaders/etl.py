"""ethereum-etl (and BigQuery ``crypto_ethereum``) CSVs, loaded as one set.

Files are recognised by header: ``transactions``, ``blocks``, ``token_transfers``,
``traces``, ``receipts``, ``logs``, ``tokens`` (``export_tokens``: decimals) and
``contracts``. Block times come from the file itself (BigQuery's
``block_timestamp``), else ``blocks.csv``, else the set's or the case's
transactions; a file whose times no file gives is refused naming the file
that would. Token amounts use decimals from ``tokens.csv``, the case's assets
or the shipped table of well-known tokens; otherwise ``amount`` stays NULL
(``amount_raw`` exact) and is counted, never assumed 18. A transaction with no
``receipt_status`` (and no receipts file) has an unknown status (NULL), not success.
Internal movements are traces with value that are not the top-level call, not
delegate/static calls, and not rewards.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from tahrix_lab.case.loaders.csvfile import Staged, first_bad, stage_csv
from tahrix_lab.case.loaders.report import FileReport
from tahrix_lab.case.loaders.run import LoadStep
from tahrix_lab.case.loaders.sqlparts import INTEGER_RE, decimal_from_raw, fetch_value, lit, number, text

TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
ORDER = ("tokens", "blocks", "contracts", "transactions", "receipts", "token_transfers", "logs", "traces")


def etl_kind(keys: set[str]) -> str | None:
    if {"tokenaddress", "fromaddress", "toaddress", "value", "transactionhash", "logindex"} <= keys:
        return "token_transfers"
    if "transactionhash" in keys and keys & {"traceaddress", "tracetype"}:
        return "traces"
    if {"hash", "fromaddress", "toaddress", "value"} <= keys:
        return "transactions"
    if {"number", "hash", "timestamp"} <= keys:
        return "blocks"
    if {"logindex", "transactionhash", "address", "data", "topics"} <= keys:
        return "logs"
    if {"transactionhash", "status"} <= keys and keys & {"gasused", "cumulativegasused"}:
        return "receipts"
    if {"address", "decimals"} <= keys:
        return "tokens"
    if {"address", "bytecode"} <= keys:
        return "contracts"
    return None


def _ts(expr: str | None) -> str:
    """ethereum-etl gives unix seconds; BigQuery ``2024-03-12 02:14:00 UTC``."""
    if expr is None:
        return "NULL::TIMESTAMP"
    t = text(expr)
    return (
        f"CASE WHEN regexp_full_match({t}, '[0-9]+') THEN epoch_ms(CAST({t} AS BIGINT) * 1000) "
        f"ELSE TRY_CAST(TRY_CAST({t} AS TIMESTAMPTZ) AS TIMESTAMP) END"
    )


def _int(expr: str | None) -> str:
    return f"TRY_CAST({number(expr)} AS BIGINT)" if expr else "NULL"


def _raw(expr: str | None) -> str:
    return number(expr) if expr else "NULL"


def _addr(st: Staged, key: str) -> str:
    c = st.col(key)
    return f"lower({text(c)})" if c else "NULL"


def _checks(
    st: Staged,
    hash_key: str,
    ints: tuple[str, ...] = (),
    raws: tuple[str, ...] = (),
    *,
    hash_optional: bool = False,
) -> list[tuple[str, str, str]]:
    h = st.need(hash_key)
    missing_ok = f"{text(h)} IS NULL" if hash_optional else "FALSE"  # block rewards have no transaction
    out = [(st.name(hash_key), f"NOT ({missing_ok} OR coalesce(regexp_full_match({text(h)}, '0x[0-9a-fA-F]{{64}}'), FALSE))",
            "{value} is not a transaction hash")]  # fmt: skip
    for k in ints + raws:
        c = st.col(k)
        if c:
            out.append((st.name(k), f"{number(c)} IS NOT NULL AND NOT regexp_full_match({number(c)}, '{INTEGER_RE}')",
                        "{value} is not a whole number"))  # fmt: skip
    return out


class EtlSet:
    """The files of one ethereum-etl export, staged together so they can lend each other block times."""

    def __init__(self, files: dict[str, Path], chain: str, case_id: str):
        self.files, self.chain, self.case_id = files, chain, case_id
        self.staged: dict[str, Staged] = {}

    def prelude(self, cur: duckdb.DuckDBPyConnection) -> None:
        for kind in ORDER:
            if kind in self.files:
                self.staged[kind] = stage_csv(cur, self.files[kind], f"_etlf_{kind}")
        cur.execute("CREATE OR REPLACE TEMP TABLE _etl_times (block_number BIGINT, block_time TIMESTAMP)")
        if b := self.staged.get("blocks"):
            first_bad(cur, b, [("timestamp", f"({_ts(b.need('timestamp'))}) IS NULL", "{value} is not a time"),
                               ("number", f"{_int(b.need('number'))} IS NULL", "{value} is not a block number")])  # fmt: skip
            cur.execute(
                f"INSERT INTO _etl_times SELECT DISTINCT {_int(b.need('number'))}, {_ts(b.need('timestamp'))} FROM {b.table}"
            )
        # the case's own block times lend themselves too (a token_transfers file loaded after its blocks)
        cur.execute(
            """INSERT INTO _etl_times SELECT DISTINCT block_number, block_time FROM transactions
               WHERE case_id = ? AND chain = ? AND block_number IS NOT NULL AND block_time IS NOT NULL
                 AND block_number NOT IN (SELECT block_number FROM _etl_times)""",
            [self.case_id, self.chain],
        )
        # what merge.fill_times gives to rows loaded before their blocks
        cur.execute(
            f"CREATE OR REPLACE TEMP TABLE _block_times AS SELECT DISTINCT {lit(self.chain)} AS chain, block_number, "
            "block_time FROM _etl_times"
        )
        cur.execute(
            "CREATE OR REPLACE TEMP TABLE _etl_txtimes (tx_hash VARCHAR, block_time TIMESTAMP, block_number BIGINT)"
        )
        if t := self.staged.get("transactions"):
            own = _ts(t.col("blocktimestamp")) if t.col("blocktimestamp") else "NULL"
            cur.execute(
                f"""INSERT INTO _etl_txtimes SELECT lower({text(t.need("hash"))}), coalesce({own}, b.block_time), n
                    FROM (SELECT *, {_int(t.col("blocknumber"))} AS n FROM {t.table}) s
                    LEFT JOIN _etl_times b ON b.block_number = s.n"""
            )
        cur.execute(
            "INSERT INTO _etl_txtimes SELECT tx_hash, block_time, block_number FROM transactions "
            "WHERE case_id = ? AND chain = ? AND tx_hash NOT IN (SELECT tx_hash FROM _etl_txtimes)",
            [self.case_id, self.chain],
        )
        cur.execute(
            "CREATE OR REPLACE TEMP TABLE _etl_receipts (tx_hash VARCHAR, status BOOLEAN, gas_used VARCHAR, price VARCHAR)"
        )
        if r := self.staged.get("receipts"):
            first_bad(cur, r, _checks(r, "transactionhash", ("gasused", "effectivegasprice", "status")))
            price = _raw(r.col("effectivegasprice"))
            cur.execute(
                f"""INSERT INTO _etl_receipts SELECT lower({text(r.need("transactionhash"))}),
                      CASE {text(r.need("status"))} WHEN '1' THEN TRUE WHEN '0' THEN FALSE END, {_raw(r.col("gasused"))}, {price}
                    FROM {r.table}"""
            )
        if k := self.staged.get("tokens"):
            dec = k.need("decimals")
            first_bad(cur, k, [("decimals", f"{number(dec)} IS NOT NULL AND NOT regexp_full_match({number(dec)}, '{INTEGER_RE}')",
                                "{value} is not a number of decimals")])  # fmt: skip
            cur.execute(
                f"""CREATE OR REPLACE TEMP TABLE _etl_tokens AS SELECT DISTINCT ON (asset_key) * FROM (
                      SELECT {lit(self.chain)} || ':' || lower({text(k.need("address"))}) AS asset_key,
                             lower({text(k.need("address"))}) AS token, TRY_CAST({number(dec)} AS INTEGER) AS decimals,
                             {text(k.col("symbol")) if k.col("symbol") else "NULL"} AS symbol,
                             {text(k.col("name")) if k.col("name") else "NULL"} AS name FROM {k.table})"""
            )
            # the export's own decimals come first
            cur.execute(
                "DELETE FROM _decimals WHERE asset_key IN (SELECT asset_key FROM _etl_tokens WHERE decimals IS NOT NULL)"
            )
            cur.execute(
                "INSERT INTO _decimals SELECT asset_key, decimals FROM _etl_tokens WHERE decimals IS NOT NULL"
            )

    def steps(self) -> list[LoadStep]:
        out = []
        for kind in ORDER:
            if kind in self.files:
                fr = FileReport(str(self.files[kind]), f"ethereum-etl {kind} ({self.chain})")
                out.append(LoadStep(fr, getattr(self, f"_{kind}"), batch="etl"))
        return out

    def _times_for(self, cur: duckdb.DuckDBPyConnection, st: Staged, table: str, fr: FileReport) -> None:
        """Rows with no block time from any file of the set or the case are held with an unknown time
        (NULL), never refused: they gain it when their block or transaction is loaded (merge.fill_times)."""
        unknown = fetch_value(cur, f"SELECT count(*) FROM {table} WHERE block_time IS NULL")
        if unknown:
            fr.notes.append(
                f"{unknown} rows without a block time (no block_timestamp column, and neither blocks.csv nor "
                "transactions.csv of the set nor the case gives their block): held with an unknown time, "
                "filled when those blocks or transactions are loaded"
            )

    # -- one stager per file kind ------------------------------------------------------
    def _tokens(self, cur: duckdb.DuckDBPyConnection, fr: FileReport) -> None:
        fr.rows_read = self.staged["tokens"].rows
        cur.execute(
            f"""INSERT INTO _as (asset_key, chain, token_address, symbol, name, decimals, standard)
                SELECT asset_key, {lit(self.chain)}, token, symbol, name, decimals, 'erc20' FROM _etl_tokens"""
        )

    def _blocks(self, cur: duckdb.DuckDBPyConnection, fr: FileReport) -> None:
        fr.rows_read = self.staged["blocks"].rows
        fr.notes.append(f"{fr.rows_read} block times used for the other files of the set")

    def _contracts(self, cur: duckdb.DuckDBPyConnection, fr: FileReport) -> None:
        fr.rows_read = self.staged["contracts"].rows
        fr.skip("contract code: nothing to load", fr.rows_read)

    def _transactions(self, cur: duckdb.DuckDBPyConnection, fr: FileReport) -> None:
        t = self.staged["transactions"]
        fr.rows_read = t.rows
        first_bad(cur, t, _checks(t, "hash", ("nonce", "transactionindex", "blocknumber", "receiptgasused", "gasprice",
                                               "receiptstatus"), ("value", "receipteffectivegasprice")))  # fmt: skip
        own_status = (
            f"CASE {text(t.col('receiptstatus'))} WHEN '1' THEN TRUE WHEN '0' THEN FALSE END"
            if t.col("receiptstatus")
            else "NULL"
        )
        gas_used = _raw(t.col("receiptgasused"))
        price = f"coalesce({_raw(t.col('receipteffectivegasprice'))}, {_raw(t.col('gasprice'))})"
        inp = text(t.col("input")) if t.col("input") else "NULL"
        cur.execute(
            f"""CREATE OR REPLACE TEMP TABLE _etl_tx AS
            SELECT s._line, lower({text(t.need("hash"))}) AS tx_hash, tt.block_time, tt.block_number,
                   {_int(t.col("transactionindex"))} AS tx_index, {_addr(t, "fromaddress")} AS frm,
                   coalesce({_addr(t, "toaddress")}, {_addr(t, "receiptcontractaddress")}) AS dst,
                   {_int(t.col("nonce"))} AS nonce, {_raw(t.need("value"))} AS value_raw,
                   coalesce({own_status}, r.status) AS status,
                   CAST(TRY_CAST(coalesce({gas_used}, r.gas_used) AS HUGEINT) * TRY_CAST(coalesce(r.price, {price}) AS HUGEINT) AS VARCHAR) AS fee_raw,
                   CASE WHEN length({inp}) >= 10 THEN left({inp}, 10) END AS selector
            FROM {t.table} s JOIN _etl_txtimes tt ON tt.tx_hash = lower({text(t.need("hash"))})
            LEFT JOIN _etl_receipts r ON r.tx_hash = tt.tx_hash"""
        )
        cur.execute("CREATE OR REPLACE TEMP TABLE _etl_tx AS SELECT DISTINCT ON (_line) * FROM _etl_tx")
        self._times_for(cur, t, "_etl_tx", fr)
        cur.execute(
            f"""INSERT INTO _tx (chain, tx_hash, block_number, block_time, tx_index, from_address, to_address, nonce,
                  value_raw, value, fee_raw, fee, status, method_selector, source, _line)
                SELECT {lit(self.chain)}, tx_hash, block_number, block_time, tx_index, frm, dst, nonce, value_raw,
                       {decimal_from_raw("value_raw", "18")}, fee_raw, {decimal_from_raw("fee_raw", "18")}, status,
                       selector, 'ethereum-etl', _line FROM _etl_tx"""
        )
        cur.execute(
            f"""INSERT INTO _mv (transfer_id, chain, tx_hash, block_time, kind, from_address, to_address, asset_key,
                  amount_raw, amount, status, _line)
                SELECT {lit(self.chain)} || ':' || tx_hash || ':native:0', {lit(self.chain)}, tx_hash, block_time, 'native',
                       frm, dst, {lit(self.chain + ":native")}, value_raw, {decimal_from_raw("value_raw", "18")}, status, _line
                FROM _etl_tx WHERE ltrim(value_raw, '0') <> ''"""
        )
        unknown = fetch_value(cur, "SELECT count(*) FROM _etl_tx WHERE status IS NULL")
        if unknown:
            fr.notes.append(
                f"{unknown} transactions without receipt status: status unknown (NULL), not success"
            )

    def _receipts(self, cur: duckdb.DuckDBPyConnection, fr: FileReport) -> None:
        r = self.staged["receipts"]
        fr.rows_read = r.rows
        block = _int(r.col("blocknumber"))
        cur.execute(
            f"""INSERT INTO _tx (chain, tx_hash, block_number, block_time, status, fee_raw, fee, source, _line)
                SELECT {lit(self.chain)}, x.tx_hash, coalesce(tt.block_number, s.n), coalesce(tt.block_time, b.block_time),
                       x.status, fee_raw, {decimal_from_raw("fee_raw", "18")}, 'ethereum-etl-receipts', s._line
                FROM (SELECT _line, lower({text(r.need("transactionhash"))}) AS tx_hash, {block} AS n FROM {r.table}) s
                JOIN (SELECT *, CAST(TRY_CAST(gas_used AS HUGEINT) * TRY_CAST(price AS HUGEINT) AS VARCHAR) AS fee_raw
                      FROM _etl_receipts) x USING (tx_hash)
                LEFT JOIN _etl_txtimes tt USING (tx_hash) LEFT JOIN _etl_times b ON b.block_number = s.n
                WHERE coalesce(tt.block_time, b.block_time) IS NOT NULL"""
        )
        fr.skip("no block time for this receipt (give blocks.csv or transactions.csv)",
                r.rows - int(fetch_value(cur, "SELECT count(*) FROM _tx") or 0))  # fmt: skip

    def _token_rows(self, cur: duckdb.DuckDBPyConnection, st: Staged, select: str, fr: FileReport) -> None:
        """``select`` gives _line, tx_hash, n (block), own_time, token, frm, dst, value_raw, log_index, token_id."""
        cur.execute(
            f"""CREATE OR REPLACE TEMP TABLE _etl_tt AS
            SELECT s.*, {lit(self.chain)} || ':' || s.token AS asset_key,
                   coalesce(s.own_time, b.block_time, tt.block_time) AS block_time, coalesce(s.n, tt.block_number) AS block_number
            FROM ({select}) s LEFT JOIN _etl_times b ON b.block_number = s.n LEFT JOIN _etl_txtimes tt ON tt.tx_hash = s.tx_hash"""
        )
        cur.execute("CREATE OR REPLACE TEMP TABLE _etl_tt AS SELECT DISTINCT ON (_line) * FROM _etl_tt")
        self._times_for(cur, st, "_etl_tt", fr)
        cur.execute(
            f"""INSERT INTO _as (asset_key, chain, token_address, standard)
                SELECT DISTINCT asset_key, {lit(self.chain)}, token, CASE WHEN token_id IS NOT NULL THEN 'erc721' END FROM _etl_tt"""
        )
        cur.execute(
            f"""INSERT INTO _tx (chain, tx_hash, block_number, block_time, status, source, _line)
                SELECT {lit(self.chain)}, tx_hash, block_number, block_time, TRUE, 'ethereum-etl-token', _line FROM _etl_tt"""
        )
        dec = "CASE WHEN t.token_id IS NOT NULL THEN 0 ELSE d.decimals END"
        cur.execute(
            f"""INSERT INTO _mv (transfer_id, chain, tx_hash, block_time, kind, log_index, from_address, to_address,
                  asset_key, token_id, amount_raw, amount, status, _line)
                SELECT {lit(self.chain)} || ':' || tx_hash || ':token:' || log_index, {lit(self.chain)}, tx_hash, block_time,
                       'token', log_index, frm, dst, t.asset_key, token_id, CASE WHEN token_id IS NULL THEN value_raw ELSE '1' END,
                       {decimal_from_raw("CASE WHEN token_id IS NULL THEN value_raw ELSE '1' END", dec)}, TRUE, _line
                FROM _etl_tt t LEFT JOIN _decimals d ON d.asset_key = t.asset_key"""
        )

    def _token_transfers(self, cur: duckdb.DuckDBPyConnection, fr: FileReport) -> None:
        st = self.staged["token_transfers"]
        fr.rows_read = st.rows
        first_bad(cur, st, _checks(st, "transactionhash", ("logindex", "blocknumber"), ("value",)))
        own = _ts(st.col("blocktimestamp")) if st.col("blocktimestamp") else "NULL::TIMESTAMP"
        self._token_rows(
            cur, st,
            f"""SELECT _line, lower({text(st.need("transactionhash"))}) AS tx_hash, {_int(st.col("blocknumber"))} AS n,
                       {own} AS own_time, {_addr(st, "tokenaddress")} AS token, {_addr(st, "fromaddress")} AS frm,
                       {_addr(st, "toaddress")} AS dst, {_raw(st.need("value"))} AS value_raw,
                       {_int(st.need("logindex"))} AS log_index, NULL::VARCHAR AS token_id FROM {st.table}""", fr,
        )  # fmt: skip
        fr.notes.append(
            "ERC-721 transfers in token_transfers look like ERC-20 ones (value = token id); give tokens.csv"
        )

    def _logs(self, cur: duckdb.DuckDBPyConnection, fr: FileReport) -> None:
        st = self.staged["logs"]
        fr.rows_read = st.rows
        if "token_transfers" in self.staged:
            fr.skip("token_transfers.csv of the same set carries these transfers", st.rows)
            return
        first_bad(cur, st, _checks(st, "transactionhash", ("logindex", "blocknumber")))
        topics = f"string_split(replace(replace(replace({text(st.need('topics'))}, '[', ''), ']', ''), '''', ''), ',')"
        hexnum = "CASE WHEN length(ltrim({x}, '0')) <= 32 THEN CAST(TRY_CAST('0x' || coalesce(nullif(ltrim({x}, '0'), ''), '0') AS UHUGEINT) AS VARCHAR) END"
        data = f"substr(lower({text(st.need('data'))}), 3)"
        cur.execute(
            f"""CREATE OR REPLACE TEMP TABLE _etl_logs AS SELECT _line, lower({text(st.need("transactionhash"))}) AS tx_hash,
                   {_int(st.col("blocknumber"))} AS n, lower({text(st.need("address"))}) AS token,
                   list_transform({topics}, lambda x: lower(trim(x))) AS t, {data} AS d, {_int(st.need("logindex"))} AS log_index
                FROM {st.table}"""
        )
        cur.execute(f"DELETE FROM _etl_logs WHERE len(t) NOT IN (3, 4) OR t[1] <> '{TRANSFER_TOPIC}'")
        fr.skip(
            "not a token Transfer event",
            st.rows - int(fetch_value(cur, "SELECT count(*) FROM _etl_logs") or 0),
        )
        self._token_rows(
            cur, st,
            f"""SELECT _line, tx_hash, n, NULL::TIMESTAMP AS own_time, token, '0x' || right(t[2], 40) AS frm,
                       '0x' || right(t[3], 40) AS dst, {hexnum.format(x="d")} AS value_raw, log_index,
                       CASE WHEN len(t) = 4 THEN {hexnum.format(x="substr(t[4], 3)")} END AS token_id
                FROM _etl_logs WHERE len(t) = 4 OR {hexnum.format(x="d")} IS NOT NULL""", fr,
        )  # fmt: skip
        over = fetch_value(cur, "SELECT count(*) FROM _etl_logs") - fetch_value(
            cur, "SELECT count(*) FROM _etl_tt"
        )
        fr.skip("value above 2^128: not read from the log data (use token_transfers.csv)", over)

    def _traces(self, cur: duckdb.DuckDBPyConnection, fr: FileReport) -> None:
        st = self.staged["traces"]
        fr.rows_read = st.rows
        first_bad(
            cur, st, _checks(st, "transactionhash", ("blocknumber", "status"), ("value",), hash_optional=True)
        )
        ta = (
            f"nullif(replace({text(st.col('traceaddress'))}, ' ', ''), '')"
            if st.col("traceaddress")
            else "NULL"
        )
        ttype = f"lower({text(st.col('tracetype'))})" if st.col("tracetype") else "'call'"
        ctype = f"lower({text(st.col('calltype'))})" if st.col("calltype") else "NULL"
        status = (
            f"CASE {text(st.col('status'))} WHEN '1' THEN TRUE WHEN '0' THEN FALSE END"
            if st.col("status")
            else "NULL"
        )
        cur.execute(
            f"""CREATE OR REPLACE TEMP TABLE _etl_tr AS
            SELECT s.*, coalesce(b.block_time, tt.block_time) AS block_time FROM (
              SELECT _line, lower({text(st.need("transactionhash"))}) AS tx_hash, {_int(st.col("blocknumber"))} AS n,
                     {ta} AS trace_address, {ttype} AS trace_type, {ctype} AS call_type, {_addr(st, "fromaddress")} AS frm,
                     {_addr(st, "toaddress")} AS dst, {_raw(st.col("value"))} AS value_raw, {status} AS ok FROM {st.table}) s
            LEFT JOIN _etl_times b ON b.block_number = s.n LEFT JOIN _etl_txtimes tt ON tt.tx_hash = s.tx_hash"""
        )
        cur.execute("CREATE OR REPLACE TEMP TABLE _etl_tr AS SELECT DISTINCT ON (_line) * FROM _etl_tr")
        reasons = {
            "block or uncle reward (no transaction)": "trace_type = 'reward' OR tx_hash IS NULL",
            "top-level call: the transaction's own value (loaded from transactions)": "trace_address IS NULL",
            "delegate/static call: moves no value of its own": "call_type IN ('delegatecall', 'staticcall', 'callcode')",
            "no value moved": "ltrim(coalesce(value_raw, ''), '0') = ''",
        }
        for reason, cond in reasons.items():
            fr.skip(reason, fetch_value(cur, f"SELECT count(*) FROM _etl_tr WHERE {cond}"))
            cur.execute(f"DELETE FROM _etl_tr WHERE {cond}")
        self._times_for(cur, st, "_etl_tr", fr)
        cur.execute(
            f"""INSERT INTO _mv (transfer_id, chain, tx_hash, block_time, kind, trace_address, from_address, to_address,
                  asset_key, amount_raw, amount, status, _line)
                SELECT {lit(self.chain)} || ':' || tx_hash || ':internal:' || trace_address, {lit(self.chain)}, tx_hash,
                       block_time, 'internal', trace_address, frm, dst, {lit(self.chain + ":native")}, value_raw,
                       {decimal_from_raw("value_raw", "18")}, ok, _line FROM _etl_tr"""
        )
        cur.execute(
            f"""INSERT INTO _tx (chain, tx_hash, block_number, block_time, source, _line)
                SELECT {lit(self.chain)}, tx_hash, n, block_time, 'ethereum-etl-traces', _line FROM _etl_tr"""
        )

    def drop(self, cur: duckdb.DuckDBPyConnection) -> None:
        for name in ("_etl_times", "_block_times", "_etl_txtimes", "_etl_receipts", "_etl_tokens", "_etl_tx", "_etl_tt", "_etl_tr",
                     "_etl_logs"):  # fmt: skip
            cur.execute(f"DROP TABLE IF EXISTS {name}")
        for st in self.staged.values():
            st.drop(cur)

//! DIFF's instrument queries (`ins_query`): tqsdk asks for instrument definitions in
//! GraphQL, always through the root field `multi_symbol_info` with filters as its
//! arguments (`instrument_id`, `class`, `exchange_id`, `product_id`, `expired`, …,
//! literal or `$variables`). This module reads such a query into a `SymbolQuery`
//! (with the `graphql-parser` crate) and writes its answer, the value tqsdk expects
//! under `symbols.<query_id>`, from the venue's instruments as the connection
//! describes them (`SymbolInfo`). It owns the query's reading and the answer's shape
//! only: it never looks the instruments up itself, never does I/O, and never panics
//! on a query (a query it cannot answer is an error the connection shows as the
//! answer's `error`).
//!
//! Every instrument is answered with all the fields tqsdk reads
//! (`tqsdk.utils_symbols._convert_symbol_to_quote`), whatever the query selects and
//! whatever its class: tqsdk never relies on a field being absent, and its quotes take
//! what they are sent. A value Bourse does not know is left out: tqsdk then keeps its
//! own default (NaN for a price, 0 for a count), exactly as for a `"-"` (which tqsdk
//! replaces with that default).

use graphql_parser::query::{
    Definition, Document, OperationDefinition, Selection, SelectionSet, Value as GraphValue,
    VariableDefinition,
};
use serde_json::{json, Map, Number, Value};

use super::request::{DiffError, DiffResult};

/// The one root field answered.
pub const ROOT_FIELD: &str = "multi_symbol_info";

/// A query read: what to answer and how to show it.
#[derive(Clone, Debug, PartialEq)]
pub struct SymbolQuery {
    /// The query's text, as sent (shown back: tqsdk matches answers to queries by it).
    pub text: String,
    /// The variables, as sent (`{}` when none were).
    pub variables: Map<String, Value>,
    /// The key of the result (`multi_symbol_info`, or the alias the query gave it).
    pub result_key: String,
    pub filter: SymbolFilter,
}

/// `multi_symbol_info`'s arguments: an instrument is answered when it passes every
/// filter given (`None`: no filter). A list filter keeps the instruments whose value is
/// in the list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SymbolFilter {
    /// Whole symbols (`SHFE.cu2501`).
    pub instrument_id: Option<Vec<String>>,
    /// `FUTURE`, `SPOT`, … (tqsdk's `Class` enum).
    pub class: Option<Vec<String>>,
    pub exchange_id: Option<Vec<String>>,
    pub product_id: Option<Vec<String>>,
    pub expired: Option<bool>,
    /// Every Bourse instrument trades at night (around the clock): `true` keeps all,
    /// `false` none.
    pub has_night: Option<bool>,
    /// Bourse has no options: `true` keeps none, `false` all.
    pub has_derivatives: Option<bool>,
    /// Bourse puts instruments in no category: any list keeps none.
    pub categories: Option<Vec<String>>,
}

/// The class of an instrument, as tqsdk names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstrumentClass {
    Future,
    Spot,
}

impl InstrumentClass {
    pub fn as_str(self) -> &'static str {
        match self {
            InstrumentClass::Future => "FUTURE",
            InstrumentClass::Spot => "SPOT",
        }
    }
}

/// An instrument as a query's answer describes it; the connection fills it from the
/// venue. Prices are in the quote currency, volumes in lots. `None` (or a float that
/// is not finite) is left out of the answer.
#[derive(Clone, Debug, PartialEq)]
pub struct SymbolInfo {
    /// The whole symbol as DIFF names it, `exchange_id.instrument_id` (`SHFE.cu2501`):
    /// the answer's `instrument_id`.
    pub symbol: String,
    pub exchange_id: String,
    /// The code within the exchange (`cu2501`).
    pub instrument_id: String,
    /// `None`: the code.
    pub instrument_name: Option<String>,
    pub class: InstrumentClass,
    pub price_tick: f64,
    /// Decimal places of a price.
    pub price_decs: u32,
    /// Units of the underlying per lot (a futures contract's multiplier; 1 on spot).
    pub volume_multiple: f64,
    /// The product (`cu`).
    pub product_id: Option<String>,
    pub expired: bool,
    /// Nanoseconds since the epoch.
    pub expire_datetime: Option<i64>,
    pub delivery_year: Option<i32>,
    pub delivery_month: Option<u32>,
    /// The last settlement price (tqsdk's `pre_settlement`; DIFF's `settlement_price`).
    pub pre_settlement: Option<f64>,
    pub pre_close: Option<f64>,
    pub pre_open_interest: Option<i64>,
    pub upper_limit: Option<f64>,
    pub lower_limit: Option<f64>,
    pub min_order_volume: Option<i64>,
    pub max_order_volume: Option<i64>,
    /// Margin per lot (tqsdk's simulator uses it).
    pub margin: Option<f64>,
    /// Fee per lot (tqsdk's simulator uses it).
    pub commission: Option<f64>,
}

/// Reads an `ins_query`'s `query` with its `variables`. Errors: the text is not
/// GraphQL, it is not one query operation, the operation asks for anything but one
/// `multi_symbol_info` field, or an argument is unknown or of the wrong type.
pub fn parse(text: &str, variables: Option<&Map<String, Value>>) -> DiffResult<SymbolQuery> {
    let document: Document<'_, &str> = graphql_parser::parse_query(text)
        .map_err(|error| DiffError::malformed(format!("the query is not GraphQL: {error}")))?;
    let mut operations = document.definitions.iter().filter_map(|definition| match definition {
        Definition::Operation(operation) => Some(operation),
        Definition::Fragment(_) => None,
    });
    let (Some(operation), None) = (operations.next(), operations.next()) else {
        return Err(DiffError::malformed("the query must hold exactly one operation"));
    };
    let (definitions, selection_set): (&[VariableDefinition<'_, &str>], _) = match operation {
        OperationDefinition::SelectionSet(selection_set) => (&[], selection_set),
        OperationDefinition::Query(query) => (&query.variable_definitions, &query.selection_set),
        OperationDefinition::Mutation(_) | OperationDefinition::Subscription(_) => {
            return Err(DiffError::unsupported("only queries are answered"))
        }
    };
    let empty = Map::new();
    let given = variables.unwrap_or(&empty);
    let scope = Scope { definitions, given };
    let field = root_field(selection_set)?;
    let mut filter = SymbolFilter::default();
    for (name, value) in &field.arguments {
        let value = scope.resolve(value)?;
        match *name {
            "instrument_id" => filter.instrument_id = string_list(name, value)?,
            "class" => filter.class = string_list(name, value)?,
            "exchange_id" => filter.exchange_id = string_list(name, value)?,
            "product_id" => filter.product_id = string_list(name, value)?,
            "categories" => filter.categories = string_list(name, value)?,
            "expired" => filter.expired = boolean(name, value)?,
            "has_night" => filter.has_night = boolean(name, value)?,
            "has_derivatives" => filter.has_derivatives = boolean(name, value)?,
            // Backtests ask for the definitions as they were then: Bourse has only now.
            "timestamp" => {}
            other => {
                return Err(DiffError::unsupported(format!(
                    "{ROOT_FIELD} has no argument {other:?}"
                )))
            }
        }
    }
    Ok(SymbolQuery {
        text: text.to_string(),
        variables: given.clone(),
        result_key: field.alias.unwrap_or(field.name).to_string(),
        filter,
    })
}

/// The one `multi_symbol_info` field a query's operation selects.
fn root_field<'q, 'a>(
    selection_set: &'q SelectionSet<'a, &'a str>,
) -> DiffResult<&'q graphql_parser::query::Field<'a, &'a str>> {
    let mut fields = selection_set.items.iter();
    match (fields.next(), fields.next()) {
        (Some(Selection::Field(field)), None) if field.name == ROOT_FIELD => Ok(field),
        (Some(Selection::Field(field)), None) => Err(DiffError::unsupported(format!(
            "only {ROOT_FIELD} is answered, not {:?}",
            field.name
        ))),
        _ => Err(DiffError::unsupported(format!("the query must select {ROOT_FIELD} alone"))),
    }
}

/// The query's variables: their definitions (with defaults) and the values given.
struct Scope<'q, 'a> {
    definitions: &'q [VariableDefinition<'a, &'a str>],
    given: &'q Map<String, Value>,
}

impl<'a> Scope<'_, 'a> {
    /// An argument's value as JSON, its variables replaced by their values (a variable
    /// neither given nor defaulted is null, as GraphQL says). Enum values become strings.
    fn resolve(&self, value: &GraphValue<'a, &'a str>) -> DiffResult<Value> {
        Ok(match value {
            GraphValue::Variable(name) => match self.given.get(*name) {
                Some(value) => value.clone(),
                None => {
                    let definition = self.definitions.iter().find(|known| known.name == *name);
                    match definition {
                        None => {
                            return Err(DiffError::malformed(format!(
                                "the variable ${name} is not defined"
                            )))
                        }
                        Some(VariableDefinition { default_value: Some(default), .. }) => {
                            // Defaults are constants: no variables in them.
                            self.resolve_constant(default)?
                        }
                        Some(_) => Value::Null,
                    }
                }
            },
            GraphValue::List(items) => Value::Array(
                items.iter().map(|item| self.resolve(item)).collect::<DiffResult<_>>()?,
            ),
            other => self.resolve_constant(other)?,
        })
    }

    fn resolve_constant(&self, value: &GraphValue<'a, &'a str>) -> DiffResult<Value> {
        Ok(match value {
            GraphValue::Variable(name) => {
                return Err(DiffError::malformed(format!(
                    "a default value cannot name a variable (${name})"
                )))
            }
            GraphValue::Int(number) => number.as_i64().map(Value::from).unwrap_or(Value::Null),
            GraphValue::Float(float) => Number::from_f64(*float).map_or(Value::Null, Value::Number),
            GraphValue::String(text) => Value::String(text.clone()),
            GraphValue::Boolean(flag) => Value::Bool(*flag),
            GraphValue::Null => Value::Null,
            GraphValue::Enum(name) => Value::String((*name).to_string()),
            GraphValue::List(items) => Value::Array(
                items.iter().map(|item| self.resolve_constant(item)).collect::<DiffResult<_>>()?,
            ),
            GraphValue::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|(key, item)| Ok(((*key).to_string(), self.resolve_constant(item)?)))
                    .collect::<DiffResult<_>>()?,
            ),
        })
    }
}

/// A list of strings (or enum values); a single one is a list of one, as GraphQL
/// coerces; null is no filter.
fn string_list(name: &str, value: Value) -> DiffResult<Option<Vec<String>>> {
    let wrong = || DiffError::malformed(format!("the argument {name} must be a list of strings"));
    match value {
        Value::Null => Ok(None),
        Value::String(text) => Ok(Some(vec![text])),
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::String(text) => Ok(text),
                _ => Err(wrong()),
            })
            .collect::<DiffResult<_>>()
            .map(Some),
        _ => Err(wrong()),
    }
}

fn boolean(name: &str, value: Value) -> DiffResult<Option<bool>> {
    match value {
        Value::Null => Ok(None),
        Value::Bool(flag) => Ok(Some(flag)),
        _ => Err(DiffError::malformed(format!("the argument {name} must be true or false"))),
    }
}

impl SymbolFilter {
    pub fn matches(&self, info: &SymbolInfo) -> bool {
        let within = |list: &Option<Vec<String>>, value: &str| {
            list.as_ref().is_none_or(|list| list.iter().any(|item| item == value))
        };
        within(&self.instrument_id, &info.symbol)
            && within(&self.class, info.class.as_str())
            && within(&self.exchange_id, &info.exchange_id)
            && self.product_id.as_ref().is_none_or(|list| {
                info.product_id.as_ref().is_some_and(|product| list.contains(product))
            })
            && self.expired.is_none_or(|expired| expired == info.expired)
            && self.has_night.is_none_or(|has_night| has_night)
            && self.has_derivatives.is_none_or(|has_derivatives| !has_derivatives)
            && self.categories.is_none()
    }
}

/// What tqsdk expects under `symbols.<query_id>`: the query and variables as sent, and
/// under `result.<multi_symbol_info or its alias>` every instrument that passes the
/// filter, in the order given.
pub fn answer(query: &SymbolQuery, instruments: &[SymbolInfo]) -> Value {
    let found: Vec<Value> =
        instruments.iter().filter(|info| query.filter.matches(info)).map(render).collect();
    let mut result = Map::new();
    result.insert(query.result_key.clone(), Value::Array(found));
    json!({
        "query": query.text,
        "variables": query.variables,
        "result": result,
    })
}

/// The answer to a query that could not be read: the query and variables as sent, and
/// the error's message as `error`. (tqsdk raises it as an exception in the user's
/// program: `查询合约服务报错`.)
pub fn error_answer(
    text: &str,
    variables: Option<&Map<String, Value>>,
    error: &DiffError,
) -> Value {
    json!({
        "query": text,
        "variables": variables.cloned().unwrap_or_default(),
        "error": error.message,
    })
}

/// When a Bourse instrument trades, in tqsdk's terms: always. tqsdk's trading day runs
/// from 18:00 (Beijing time) on the trading day before to 18:00 on the day; its night
/// session's times are read from the day before's date, its day session's from the
/// day's own. So the night session 18:00–24:00 and the day session 00:00–18:00 cover
/// every instant of every trading day, with neither gap nor overlap (tqsdk's trading
/// days are Monday to Friday: a weekend belongs to Monday's trading day, which these
/// times cover from Friday 18:00 on, not on the weekend).
pub fn trading_time() -> Value {
    json!({
        "day": [["00:00:00", "18:00:00"]],
        "night": [["18:00:00", "24:00:00"]],
    })
}

/// One instrument as the answer lists it (the fields of tqsdk's `basic`, `tradeable`
/// and `future` fragments that Bourse knows).
pub fn render(info: &SymbolInfo) -> Value {
    let mut fields = Map::new();
    let mut put = |key: &str, value: Value| {
        fields.insert(key.to_string(), value);
    };
    put("__typename", Value::from(typename(info.class)));
    put("instrument_id", Value::from(info.symbol.as_str()));
    put("exchange_id", Value::from(info.exchange_id.as_str()));
    put(
        "instrument_name",
        Value::from(info.instrument_name.as_deref().unwrap_or(&info.instrument_id)),
    );
    put("english_name", Value::from(info.instrument_id.as_str()));
    put("class", Value::from(info.class.as_str()));
    put("price_decs", Value::from(info.price_decs));
    put("trading_time", trading_time());
    put("expired", Value::from(info.expired));
    put("quote_multiple", Value::from(1));
    if let Some(multiple) = whole_or_float(info.volume_multiple) {
        fields.insert("volume_multiple".to_string(), Value::Number(multiple));
    }
    let mut put_number = |key: &str, value: Option<f64>| {
        if let Some(number) = value.and_then(Number::from_f64) {
            fields.insert(key.to_string(), Value::Number(number));
        }
    };
    put_number("price_tick", Some(info.price_tick));
    put_number("settlement_price", info.pre_settlement);
    put_number("pre_close", info.pre_close);
    put_number("upper_limit", info.upper_limit);
    put_number("lower_limit", info.lower_limit);
    put_number("margin", info.margin);
    put_number("commission", info.commission);
    let mut put_integer = |key: &str, value: Option<i64>| {
        if let Some(value) = value {
            fields.insert(key.to_string(), Value::from(value));
        }
    };
    put_integer("pre_open_interest", info.pre_open_interest);
    put_integer("expire_datetime", info.expire_datetime);
    put_integer("delivery_year", info.delivery_year.map(i64::from));
    put_integer("delivery_month", info.delivery_month.map(i64::from));
    for key in ["min_limit_order_volume", "min_market_order_volume"] {
        put_integer(key, info.min_order_volume);
    }
    for key in ["max_limit_order_volume", "max_market_order_volume"] {
        put_integer(key, info.max_order_volume);
    }
    if let Some(product_id) = &info.product_id {
        fields.insert("product_id".to_string(), Value::from(product_id.as_str()));
        fields.insert("product_short_name".to_string(), Value::from(product_id.as_str()));
    }
    Value::Object(fields)
}

/// The GraphQL type of an instrument of `class` (tqsdk's schema: `future`, `spot`).
fn typename(class: InstrumentClass) -> &'static str {
    match class {
        InstrumentClass::Future => "future",
        InstrumentClass::Spot => "spot",
    }
}

/// A finite float as JSON, a whole one as an integer (`5`, not `5.0`: tqsdk's
/// `volume_multiple` is an int).
fn whole_or_float(value: f64) -> Option<Number> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if value.fract() == 0.0 && value.abs() <= EXACT {
        return Some(Number::from(value as i64));
    }
    Number::from_f64(value)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::gateways::diff::request::tests::tqsdk;
    use crate::gateways::diff::request::{decode, Pack};

    /// An `ins_query` exactly as tqsdk sent it, read.
    fn tqsdk_query(name: &str) -> SymbolQuery {
        let Ok(Pack::InsQuery(pack)) = decode(tqsdk(name)) else { panic!("{name}: a query") };
        parse(&pack.query, pack.variables.as_ref()).unwrap_or_else(|error| panic!("{error}"))
    }

    fn future(symbol: &str, product: &str, expired: bool) -> SymbolInfo {
        let (exchange_id, code) = symbol.split_once('.').unwrap_or(("", symbol));
        SymbolInfo {
            symbol: symbol.into(),
            exchange_id: exchange_id.into(),
            instrument_id: code.into(),
            instrument_name: None,
            class: InstrumentClass::Future,
            price_tick: 10.0,
            price_decs: 0,
            volume_multiple: 5.0,
            product_id: Some(product.into()),
            expired,
            expire_datetime: Some(1_736_924_400_000_000_000),
            delivery_year: Some(2025),
            delivery_month: Some(1),
            pre_settlement: Some(75_000.0),
            pre_close: None,
            pre_open_interest: None,
            upper_limit: None,
            lower_limit: None,
            min_order_volume: Some(1),
            max_order_volume: Some(1000),
            margin: Some(37_500.0),
            commission: Some(3.0),
        }
    }

    fn spot(symbol: &str) -> SymbolInfo {
        SymbolInfo {
            class: InstrumentClass::Spot,
            price_tick: 0.01,
            price_decs: 2,
            volume_multiple: 1.0,
            product_id: None,
            expire_datetime: None,
            delivery_year: None,
            delivery_month: None,
            pre_settlement: None,
            margin: None,
            commission: None,
            ..future(symbol, "", false)
        }
    }

    fn venue() -> Vec<SymbolInfo> {
        vec![
            future("SHFE.cu2501", "cu", false),
            future("SHFE.cu2502", "cu", false),
            future("SHFE.cu2412", "cu", true),
            future("SHFE.au2502", "au", false),
            spot("BOURSE.BTC-USD"),
        ]
    }

    fn answered(query: &SymbolQuery) -> Vec<String> {
        let answer = answer(query, &venue());
        answer["result"][query.result_key.as_str()]
            .as_array()
            .map(|found| {
                found
                    .iter()
                    .filter_map(|info| info["instrument_id"].as_str())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn tqsdks_batch_quote_query_names_its_instruments() {
        let query = tqsdk_query("query_batch");
        assert_eq!(
            query.filter,
            SymbolFilter {
                instrument_id: Some(vec!["SHFE.cu2501".into(), "SHFE.cu2502".into()]),
                ..SymbolFilter::default()
            }
        );
        assert_eq!(query.result_key, "multi_symbol_info");
        assert_eq!(answered(&query), ["SHFE.cu2501", "SHFE.cu2502"]);
        let answer = answer(&query, &venue());
        // tqsdk matches the answer to its query by the text.
        let Ok(Pack::InsQuery(pack)) = decode(tqsdk("query_batch")) else { panic!("a query") };
        assert_eq!(answer["query"], Value::from(pack.query));
        assert_eq!(answer["variables"], json!({}));
    }

    #[test]
    fn tqsdks_single_quote_query_takes_its_variable() {
        let query = tqsdk_query("query_single");
        assert_eq!(query.filter.instrument_id, Some(vec!["SHFE.cu2501".into()]));
        assert_eq!(
            query.variables,
            json!({"instrument_id": ["SHFE.cu2501"]}).as_object().cloned().unwrap()
        );
        assert_eq!(answered(&query), ["SHFE.cu2501"]);
        assert_eq!(
            answer(&query, &venue())["variables"],
            json!({"instrument_id": ["SHFE.cu2501"]})
        );
    }

    #[test]
    fn tqsdks_query_quotes_filters() {
        let query = tqsdk_query("query_quotes");
        assert_eq!(
            query.filter,
            SymbolFilter {
                class: Some(vec!["FUTURE".into()]),
                exchange_id: Some(vec!["SHFE".into()]),
                product_id: Some(vec!["cu".into()]),
                expired: Some(false),
                has_night: Some(true),
                ..SymbolFilter::default()
            }
        );
        assert_eq!(answered(&query), ["SHFE.cu2501", "SHFE.cu2502"]);
        // Bourse has no continuous contracts.
        assert_eq!(answered(&tqsdk_query("query_cont")), Vec::<String>::new());
    }

    #[test]
    fn filters_from_variables_defaults_and_literals() {
        let read = |text: &str, variables: Value| {
            parse(text, variables.as_object()).map(|query| answered(&query))
        };
        let by_class = "query($c: [Class], $e: [String] = [\"BOURSE\"]) { multi_symbol_info(class: $c, exchange_id: $e) { __typename } }";
        assert_eq!(read(by_class, json!({"c": ["SPOT"]})), Ok(vec!["BOURSE.BTC-USD".into()]));
        assert_eq!(
            read(by_class, json!({"c": "SPOT", "e": null})),
            Ok(vec!["BOURSE.BTC-USD".into()])
        );
        assert_eq!(read(by_class, json!({"c": ["FUTURE"]})), Ok(vec![]));
        let expired = "{ symbols: multi_symbol_info(expired: true, timestamp: 1700000000000000000) { ... on basic { instrument_id } } }";
        let query = parse(expired, None).unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(query.result_key, "symbols");
        assert_eq!(answered(&query), ["SHFE.cu2412"]);
        let all = "{ multi_symbol_info { __typename } }";
        assert_eq!(read(all, json!({})).map(|found| found.len()), Ok(5));
        assert_eq!(
            read("{ multi_symbol_info(has_night: false) { __typename } }", json!({})),
            Ok(vec![])
        );
        assert_eq!(
            read("{ multi_symbol_info(has_derivatives: true) { __typename } }", json!({})),
            Ok(vec![])
        );
        assert_eq!(
            read("{ multi_symbol_info(categories: [OIL]) { __typename } }", json!({})),
            Ok(vec![])
        );
        assert_eq!(
            read(
                "query($p: [String]) { multi_symbol_info(product_id: $p) { __typename } }",
                json!({"p": ["au"]})
            ),
            Ok(vec!["SHFE.au2502".into()])
        );
    }

    #[test]
    fn what_cannot_be_answered_is_an_error() {
        let code = |text: &str, variables: &Value| {
            parse(text, variables.as_object()).map(|_| ()).map_err(|error| error.code.as_str())
        };
        let none = json!({});
        assert_eq!(code("query { multi_symbol_info(", &none), Err("malformed"));
        assert_eq!(code("", &none), Err("malformed"));
        assert_eq!(code("fragment f on basic { instrument_id }", &none), Err("malformed"));
        assert_eq!(
            code("{ a: multi_symbol_info { x } } { multi_symbol_info { x } }", &none),
            Err("malformed")
        );
        assert_eq!(code("mutation { multi_symbol_info { x } }", &none), Err("unsupported"));
        assert_eq!(
            code("{ symbol_info(instrument_id: [\"A\"]) { x } }", &none),
            Err("unsupported")
        );
        assert_eq!(code("{ multi_symbol_info { x } other { y } }", &none), Err("unsupported"));
        assert_eq!(code("{ ...root }", &none), Err("unsupported"));
        assert_eq!(code("{ multi_symbol_info(strike: 5) { x } }", &none), Err("unsupported"));
        assert_eq!(code("{ multi_symbol_info(instrument_id: $x) { x } }", &none), Err("malformed"));
        assert_eq!(code("{ multi_symbol_info(instrument_id: 5) { x } }", &none), Err("malformed"));
        assert_eq!(code("{ multi_symbol_info(expired: \"no\") { x } }", &none), Err("malformed"));
        assert_eq!(
            code(
                "query($i: [String]) { multi_symbol_info(instrument_id: $i) { x } }",
                &json!({"i": [1]})
            ),
            Err("malformed")
        );
        // Nesting is bounded by the parser, not by the stack.
        let deep = format!(
            "{{ multi_symbol_info(instrument_id: {}{}) {{ x }} }}",
            "[".repeat(50_000),
            "]".repeat(50_000)
        );
        assert_eq!(code(&deep, &none), Err("malformed"));
        let error = parse("{ nope }", None).err().unwrap_or_else(|| DiffError::malformed("?"));
        let shown = error_answer("{ nope }", None, &error);
        assert_eq!(shown["query"], "{ nope }");
        assert_eq!(shown["variables"], json!({}));
        assert!(shown["error"]
            .as_str()
            .is_some_and(|message| message.contains("multi_symbol_info")));
    }

    #[test]
    fn an_instrument_is_shown_with_the_fields_tqsdk_reads() {
        assert_eq!(
            render(&future("SHFE.cu2501", "cu", false)),
            json!({
                "__typename": "future",
                "instrument_id": "SHFE.cu2501",
                "exchange_id": "SHFE",
                "instrument_name": "cu2501",
                "english_name": "cu2501",
                "class": "FUTURE",
                "price_tick": 10.0,
                "price_decs": 0,
                "volume_multiple": 5,
                "quote_multiple": 1,
                "product_id": "cu",
                "product_short_name": "cu",
                "expired": false,
                "expire_datetime": 1_736_924_400_000_000_000_i64,
                "delivery_year": 2025,
                "delivery_month": 1,
                "settlement_price": 75000.0,
                "min_limit_order_volume": 1,
                "min_market_order_volume": 1,
                "max_limit_order_volume": 1000,
                "max_market_order_volume": 1000,
                "margin": 37500.0,
                "commission": 3.0,
                "trading_time": {"day": [["00:00:00", "18:00:00"]], "night": [["18:00:00", "24:00:00"]]},
            })
        );
        // What is not known is left out (tqsdk keeps NaN), and so is what is not finite.
        let mut btc = spot("BOURSE.BTC-USD");
        btc.upper_limit = Some(f64::NAN);
        btc.volume_multiple = 0.5;
        let shown = render(&btc);
        for absent in [
            "settlement_price",
            "upper_limit",
            "pre_close",
            "product_id",
            "margin",
            "expire_datetime",
        ] {
            assert!(shown.get(absent).is_none(), "{absent}");
        }
        assert_eq!(
            (shown["class"].as_str(), shown["__typename"].as_str()),
            (Some("SPOT"), Some("spot"))
        );
        assert_eq!(shown["volume_multiple"], json!(0.5));
        assert_eq!(shown["price_tick"], json!(0.01));
    }
}

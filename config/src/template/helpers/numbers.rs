//! Number helpers: arithmetic with integers kept integers, min/max, parsing text into numbers, printf-style `format`.

use super::*;

/// A number of a template: integers stay integers (64-bit signed, as in CEL and Kubernetes' `int64`); any
/// float makes the operation a float one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    fn as_f64(self) -> f64 {
        match self {
            // Precision beyond 2^53 is lost, as in every language that mixes the two.
            Number::Int(int) => int as f64,
            Number::Float(float) => float,
        }
    }
}

/// A number argument. Text is never silently a number (`"3"` is refused with a pointer to `parseInt`): labels
/// and annotations are strings, and arithmetic on them should say so.
pub(super) fn number_of(value: &Value) -> Result<Number, String> {
    match value {
        Value::Number(number) => match number.as_i64() {
            Some(int) => Ok(Number::Int(int)),
            None if number.is_u64() => Err(format!("{number} is beyond the 64-bit signed integer range")),
            None => number
                .as_f64()
                .map(Number::Float)
                .ok_or_else(|| format!("{number} is not a number")),
        },
        Value::String(text) => Err(format!(
            "expects numbers, got the string {}; convert text with `parseInt` or `parseFloat`",
            serde_json::to_string(text).unwrap_or_default()
        )),
        other => Err(format!("expects numbers, got {}", kind_of(other))),
    }
}

pub(super) fn number_value(number: Number) -> Result<Value, String> {
    match number {
        Number::Int(int) => Ok(Value::from(int)),
        Number::Float(float) => serde_json::Number::from_f64(float)
            .map(Value::Number)
            .ok_or_else(|| "the result is not a finite number".to_string()),
    }
}

/// A non-negative integer argument (a length, an index, a count).
pub(super) fn count_of(value: &Value, what: &str) -> Result<usize, String> {
    match value.as_u64() {
        Some(count) => Ok(usize::try_from(count).unwrap_or(usize::MAX)),
        None => Err(format!(
            "{what} must be a non-negative integer, got {}",
            to_text(value)?
        )),
    }
}

/// An arithmetic helper's operation.
#[derive(Clone, Copy)]
pub(super) enum Operation {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

impl Operation {
    fn ints(self, a: i64, b: i64) -> Option<i64> {
        match self {
            Operation::Add => a.checked_add(b),
            Operation::Sub => a.checked_sub(b),
            Operation::Mul => a.checked_mul(b),
            Operation::Div => a.checked_div(b),
            Operation::Mod => a.checked_rem(b),
        }
    }

    fn floats(self, a: f64, b: f64) -> f64 {
        match self {
            Operation::Add => a + b,
            Operation::Sub => a - b,
            Operation::Mul => a * b,
            Operation::Div => a / b,
            Operation::Mod => a % b,
        }
    }
}

/// `add`, `sub`, `mul`, `div`, `mod` over two or more numbers, left to right: integers while every argument is
/// one (checked: overflow is an error, never a wrap; `div` truncates toward zero, `mod` takes the dividend's
/// sign), floats as soon as one argument is a float. Dividing by zero is an error in both.
pub(super) fn arithmetic(args: &[Value], operation: Operation) -> Result<Value, String> {
    let numbers = args.iter().map(number_of).collect::<Result<Vec<_>, _>>()?;
    if matches!(operation, Operation::Div | Operation::Mod) && numbers[1..].iter().any(|n| n.as_f64() == 0.0) {
        return Err("division by zero".to_string());
    }
    let all_ints = numbers.iter().all(|n| matches!(n, Number::Int(_)));
    let mut result = numbers[0];
    for &next in &numbers[1..] {
        result = match (result, next) {
            (Number::Int(a), Number::Int(b)) if all_ints => Number::Int(
                operation
                    .ints(a, b)
                    .ok_or("integer overflow (integers are 64-bit signed)")?,
            ),
            (a, b) => Number::Float(operation.floats(a.as_f64(), b.as_f64())),
        };
    }
    number_value(result)
}

pub(super) fn compare_numbers(a: Number, b: Number) -> std::cmp::Ordering {
    match (a, b) {
        (Number::Int(a), Number::Int(b)) => a.cmp(&b),
        (a, b) => a.as_f64().total_cmp(&b.as_f64()),
    }
}

/// `min` / `max` of its arguments, or of one list argument; the winner keeps its type.
pub(super) fn extreme(args: &[Value], wanted: std::cmp::Ordering) -> Result<Value, String> {
    let items = match args {
        [Value::Array(items)] => items.as_slice(),
        _ => args,
    };
    let mut best: Option<(Number, &Value)> = None;
    for item in items {
        let number = number_of(item)?;
        if best.is_none_or(|(current, _)| compare_numbers(number, current) == wanted) {
            best = Some((number, item));
        }
    }
    best.map(|(_, value)| value.clone())
        .ok_or_else(|| "expects at least one number, got an empty list".to_string())
}

/// An integer from text (`parseInt "42"`, `parseInt "ff" 16`; base 2 to 36, an optional sign, nothing else, not
/// even spaces) or an integer as it is.
pub(super) fn helper_parse_int(args: &[Value]) -> Result<Value, String> {
    let base = match args.get(1) {
        Some(base) => count_of(base, "the base")?,
        None => 10,
    };
    if !(2..=36).contains(&base) {
        return Err(format!("the base must be from 2 to 36, got {base}"));
    }
    match &args[0] {
        Value::String(text) => i64::from_str_radix(text, base as u32).map(Value::from).map_err(|_| {
            format!(
                "{} is not a base-{base} integer (64-bit signed)",
                serde_json::to_string(text).unwrap_or_default()
            )
        }),
        Value::Number(_) => match number_of(&args[0])? {
            Number::Int(int) => Ok(Value::from(int)),
            Number::Float(float) => Err(format!("{float} is not an integer")),
        },
        other => Err(format!("expects text or an integer, got {}", kind_of(other))),
    }
}

/// A float from text (`parseFloat "1.5"`, `"2e3"`) or a number; infinities and NaN are refused.
pub(super) fn helper_parse_float(args: &[Value]) -> Result<Value, String> {
    let float = match &args[0] {
        Value::String(text) => text
            .parse::<f64>()
            .ok()
            .filter(|float| float.is_finite())
            .ok_or_else(|| format!("{} is not a number", serde_json::to_string(text).unwrap_or_default()))?,
        Value::Number(_) => number_of(&args[0])?.as_f64(),
        other => return Err(format!("expects text or a number, got {}", kind_of(other))),
    };
    number_value(Number::Float(float))
}

/// `format "%s-%03d" a b`: a printf subset. Verbs `%s` (text; `%.Ns` its first N characters), `%d` (an integer),
/// `%f` / `%.Nf` (a number, 6 or N decimals), `%x` (an integer or text, lowercase hex), `%q` (text, quoted as a
/// JSON string), `%v` (any value, as `toString` writes it), `%%`; each with an optional width and the flags `-`
/// (pad on the right) and `0` (pad with zeros, after a sign). Widths and precisions are at most [`MAX_WIDTH`],
/// every argument must be used, and each verb needs one: the result is never much larger than its inputs.
pub(super) fn helper_format(args: &[Value]) -> Result<Value, String> {
    let pattern = args[0]
        .as_str()
        .ok_or_else(|| format!("the first argument must be the format text, got {}", kind_of(&args[0])))?;
    let mut values = args[1..].iter();
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let (mut left, mut zero) = (false, false);
        while let Some(flag) = chars.next_if(|c| matches!(c, '-' | '0')) {
            if flag == '-' {
                left = true;
            } else {
                zero = true;
            }
        }
        let width = format_number(&mut chars, "width")?;
        let precision = match chars.next_if_eq(&'.') {
            Some(_) => Some(format_number(&mut chars, "precision")?.unwrap_or(0)),
            None => None,
        };
        let verb = chars
            .next()
            .ok_or("the format ends inside a verb (write `%%` for a percent sign)")?;
        if verb == '%' {
            out.push('%');
            continue;
        }
        if !matches!(verb, 's' | 'd' | 'f' | 'x' | 'q' | 'v') {
            return Err(format!("unknown verb `%{verb}` (supported: %s %d %f %x %q %v %%)"));
        }
        if precision.is_some() && !matches!(verb, 's' | 'f') {
            return Err(format!("a precision applies to `%s` and `%f`, not `%{verb}`"));
        }
        let value = values.next().ok_or_else(|| format!("`%{verb}` has no argument left"))?;
        let text = match verb {
            's' => {
                let text = text_of(value)?;
                match precision {
                    Some(precision) => text.chars().take(precision).collect(),
                    None => text,
                }
            }
            'd' => match number_of(value)? {
                Number::Int(int) => int.to_string(),
                Number::Float(float) => return Err(format!("`%d` expects an integer, got {float}; use `%.0f`")),
            },
            'f' => format!("{:.*}", precision.unwrap_or(6), number_of(value)?.as_f64()),
            'x' => match value {
                Value::String(text) => hex(text.as_bytes()),
                _ => match number_of(value)? {
                    Number::Int(int) if int < 0 => format!("-{:x}", int.unsigned_abs()),
                    Number::Int(int) => format!("{int:x}"),
                    Number::Float(float) => return Err(format!("`%x` expects an integer or text, got {float}")),
                },
            },
            'q' => serde_json::to_string(&text_of(value)?).map_err(|e| e.to_string())?,
            _ => to_text(value)?,
        };
        let padding = width.unwrap_or(0).saturating_sub(text.chars().count());
        if left {
            out.push_str(&text);
            out.extend(std::iter::repeat_n(' ', padding));
        } else if zero {
            let (sign, digits) = match text.strip_prefix('-') {
                Some(digits) if matches!(verb, 'd' | 'f' | 'x' | 'v') => ("-", digits),
                _ => ("", text.as_str()),
            };
            out.push_str(sign);
            out.extend(std::iter::repeat_n('0', padding));
            out.push_str(digits);
        } else {
            out.extend(std::iter::repeat_n(' ', padding));
            out.push_str(&text);
        }
    }
    let unused = values.len();
    if unused > 0 {
        return Err(format!(
            "{} argument{} given, {unused} not used by the format",
            args.len() - 1,
            if args.len() == 2 { "" } else { "s" }
        ));
    }
    Ok(Value::String(out))
}

/// The decimal number of a width or precision in a `format` verb, if any; at most [`MAX_WIDTH`].
pub(super) fn format_number(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    what: &str,
) -> Result<Option<usize>, String> {
    let mut number: Option<usize> = None;
    while let Some(digit) = chars.next_if(char::is_ascii_digit) {
        let value = number.unwrap_or(0) * 10 + digit.to_digit(10).unwrap_or(0) as usize;
        if value > MAX_WIDTH {
            return Err(format!("a {what} must be at most {MAX_WIDTH}"));
        }
        number = Some(value);
    }
    Ok(number)
}

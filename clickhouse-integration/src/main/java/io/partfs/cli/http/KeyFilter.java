package io.partfs.cli.http;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Which cache keys a request needs: exact keys and key prefixes (a row is wanted when it matches
 * any of them), or everything. Built from request parameters, or from the text of the
 * ClickHouse queries reading the system-table view, which is how a {@code WHERE key = '...'}
 * or {@code WHERE key LIKE 'prefix%'} reaches the endpoint: ClickHouse's {@code url()} sends
 * no filter, so the sidecar looks up the running queries that read the view.
 *
 * <p>Correctness does not depend on the parsing: ClickHouse applies the WHERE clause again to
 * what the endpoint returns, so a filter here only has to return a superset of the rows the
 * query keeps. Only conditions that are top-level conjuncts of the view's WHERE clause are
 * used (dropping a conjunct widens the result); anything else (OR, the view read twice, a
 * join) means no filter.
 */
public final class KeyFilter {
    private static final KeyFilter ALL = new KeyFilter(true, List.of(), List.of(), true);

    private final boolean all;
    private final List<String> keys;
    private final List<String> prefixes;
    private final boolean values;

    private KeyFilter(boolean all, List<String> keys, List<String> prefixes, boolean values) {
        this.all = all;
        this.keys = List.copyOf(new TreeSet<>(keys));
        this.prefixes = List.copyOf(new TreeSet<>(prefixes));
        this.values = values;
    }

    public static KeyFilter all() {
        return ALL;
    }

    /** Rows whose key equals one of {@code keys} or starts with one of {@code prefixes}; both empty means all. */
    public static KeyFilter of(List<String> keys, List<String> prefixes, boolean values) {
        return new KeyFilter(keys.isEmpty() && prefixes.isEmpty(), keys, prefixes, values);
    }

    public boolean isAll() {
        return all;
    }

    public List<String> keys() {
        return keys;
    }

    /** Prefixes, none of which starts with another (a longer one adds nothing). */
    public List<String> prefixes() {
        List<String> out = new ArrayList<>();
        for (String p : prefixes) {
            if (out.stream().noneMatch(p::startsWith)) {
                out.add(p);
            }
        }
        return out;
    }

    /** False when no query reads the value column: rows then carry an empty value. */
    public boolean values() {
        return values;
    }

    /** The union of two filters: a row either wants is wanted. */
    public KeyFilter or(KeyFilter o) {
        if (all || o.all) {
            return new KeyFilter(true, List.of(), List.of(), values || o.values);
        }
        List<String> k = new ArrayList<>(keys);
        k.addAll(o.keys);
        List<String> p = new ArrayList<>(prefixes);
        p.addAll(o.prefixes);
        return new KeyFilter(false, k, p, values || o.values);
    }

    @Override
    public String toString() {
        return all ? "all keys" : "keys " + keys + " prefixes " + prefixes() + (values ? "" : " (without values)");
    }

    // ---- reading the filter out of a query that reads the view ----

    private static final Pattern ENDS_CLAUSE = Pattern.compile(
            "(?i)^(GROUP\\s+BY|ORDER\\s+BY|LIMIT|HAVING|FORMAT|SETTINGS|UNION|INTO\\s+OUTFILE|WITH\\s+TOTALS)\\b");
    private static final String COLUMN = "(?:[A-Za-z_][A-Za-z0-9_]*\\.)?`?key`?";
    private static final Pattern EQUALS = Pattern.compile("(?is)^" + COLUMN + "\\s*==?\\s*('.*')$");
    private static final Pattern IN = Pattern.compile("(?is)^" + COLUMN + "\\s+IN\\s*\\((.*)\\)$");
    private static final Pattern LIKE = Pattern.compile("(?is)^" + COLUMN + "\\s+LIKE\\s+('.*')$");
    private static final Pattern STARTS_WITH = Pattern.compile("(?is)^startsWith\\s*\\(\\s*" + COLUMN + "\\s*,\\s*('.*')\\s*\\)$");

    /**
     * The keys a query needs from the view named {@code view} ({@code db.name}), or all keys
     * when the query's condition on the view cannot be read as a conjunction of key conditions.
     */
    public static KeyFilter fromQuery(String sql, String view) {
        List<Token> tokens = Token.split(sql);
        int at = -1;
        for (int i = 0; i < tokens.size(); i++) {
            if (tokens.get(i).is(view)) {
                if (at >= 0) {
                    return all(); // read twice: union, join or subquery; no filter
                }
                at = i;
            }
        }
        boolean values = sql.toLowerCase(Locale.ROOT).matches("(?s).*(\\bvalue\\b|\\*|\\bcolumns\\s*\\().*");
        if (at < 0) {
            return withValues(all(), values);
        }
        int depth = tokens.get(at).depth;
        int i = at + 1;
        // an optional alias, then WHERE; anything else (JOIN, FINAL, ARRAY JOIN) means no filter
        if (i < tokens.size() && tokens.get(i).text.equalsIgnoreCase("AS")) {
            i++;
        }
        if (i < tokens.size() && tokens.get(i).isWord() && !tokens.get(i).text.equalsIgnoreCase("WHERE")) {
            i++;
        }
        if (i >= tokens.size() || !tokens.get(i).text.equalsIgnoreCase("WHERE") || tokens.get(i).depth != depth) {
            return withValues(all(), values);
        }
        List<List<Token>> conjuncts = new ArrayList<>();
        List<Token> current = new ArrayList<>();
        for (i++; i < tokens.size(); i++) {
            Token t = tokens.get(i);
            if (t.depth < depth || (t.depth == depth && ENDS_CLAUSE.matcher(t.text + " " + next(tokens, i)).find())) {
                break;
            }
            if (t.depth == depth && t.text.equalsIgnoreCase("OR")) {
                return withValues(all(), values);
            }
            if (t.depth == depth && t.text.equalsIgnoreCase("AND")) {
                conjuncts.add(current);
                current = new ArrayList<>();
            } else {
                current.add(t);
            }
        }
        conjuncts.add(current);
        List<String> keys = new ArrayList<>();
        List<String> prefixes = new ArrayList<>();
        boolean narrowed = false;
        for (List<Token> c : conjuncts) {
            String text = Token.join(c);
            Optional<List<String>> k = keysOf(text);
            Optional<String> p = prefixOf(text);
            if (k.isPresent() && !narrowed) {
                keys.addAll(k.get());
                narrowed = true;
            } else if (p.isPresent() && !narrowed) {
                prefixes.add(p.get());
                narrowed = true;
            }
        }
        // one narrowing conjunct is enough (the others only narrow further)
        return narrowed ? of(keys, prefixes, values) : withValues(all(), values);
    }

    private static KeyFilter withValues(KeyFilter f, boolean values) {
        return f.values == values ? f : new KeyFilter(f.all, f.keys, f.prefixes, values);
    }

    private static String next(List<Token> tokens, int i) {
        return i + 1 < tokens.size() ? tokens.get(i + 1).text : "";
    }

    private static Optional<List<String>> keysOf(String conjunct) {
        Matcher m = EQUALS.matcher(conjunct);
        if (m.matches()) {
            return literal(m.group(1)).map(List::of);
        }
        m = IN.matcher(conjunct);
        if (m.matches()) {
            List<String> out = new ArrayList<>();
            for (Token t : Token.split(m.group(1))) {
                if (t.text.equals(",")) {
                    continue;
                }
                Optional<String> s = literal(t.text);
                if (s.isEmpty()) {
                    return Optional.empty();
                }
                out.add(s.get());
            }
            return out.isEmpty() ? Optional.empty() : Optional.of(out);
        }
        return Optional.empty();
    }

    private static Optional<String> prefixOf(String conjunct) {
        Matcher m = STARTS_WITH.matcher(conjunct);
        if (m.matches()) {
            return literal(m.group(1));
        }
        m = LIKE.matcher(conjunct);
        if (m.matches()) {
            return literal(m.group(1)).map(KeyFilter::likePrefix);
        }
        return Optional.empty();
    }

    /** The fixed start of a LIKE pattern: up to its first unescaped % or _. */
    static String likePrefix(String pattern) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < pattern.length(); i++) {
            char c = pattern.charAt(i);
            if (c == '\\' && i + 1 < pattern.length()) {
                b.append(pattern.charAt(++i));
            } else if (c == '%' || c == '_') {
                break;
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }

    /** The value of one ClickHouse string literal ('...' with backslash escapes or doubled quotes). */
    static Optional<String> literal(String text) {
        if (text.length() < 2 || text.charAt(0) != '\'' || text.charAt(text.length() - 1) != '\'') {
            return Optional.empty();
        }
        StringBuilder b = new StringBuilder();
        for (int i = 1; i < text.length() - 1; i++) {
            char c = text.charAt(i);
            if (c == '\'' && text.charAt(i + 1) == '\'' && i + 1 < text.length() - 1) {
                b.append('\'');
                i++;
            } else if (c == '\'') {
                return Optional.empty(); // two literals, not one
            } else if (c == '\\' && i + 1 < text.length() - 1) {
                char e = text.charAt(++i);
                switch (e) {
                    case 'n' -> b.append('\n');
                    case 't' -> b.append('\t');
                    case 'r' -> b.append('\r');
                    case 'b' -> b.append('\b');
                    case 'f' -> b.append('\f');
                    case '0' -> b.append('\0');
                    case 'a' -> b.append('\u0007');
                    case 'v' -> b.append('\u000b');
                    case 'e' -> b.append('\u001b');
                    case 'x' -> {
                        if (i + 2 >= text.length() - 1 || !text.substring(i + 1, i + 3).matches("[0-9A-Fa-f]{2}")) {
                            return Optional.empty();
                        }
                        b.append((char) Integer.parseInt(text.substring(i + 1, i + 3), 16));
                        i += 2;
                    }
                    default -> b.append(e);
                }
            } else {
                b.append(c);
            }
        }
        return Optional.of(b.toString());
    }

    /** A lexical token of a query with its parenthesis depth. */
    private record Token(String text, int depth) {
        boolean is(String name) {
            return text.equalsIgnoreCase(name) || text.replace("`", "").equalsIgnoreCase(name);
        }

        boolean isWord() {
            return text.matches("[A-Za-z_][A-Za-z0-9_]*|`[^`]+`");
        }

        static String join(List<Token> tokens) {
            StringBuilder b = new StringBuilder();
            for (Token t : tokens) {
                if (b.length() > 0 && !t.text.equals("(") && !t.text.equals(")") && !t.text.equals(",")
                        && !b.toString().endsWith("(")) {
                    b.append(' ');
                }
                b.append(t.text);
            }
            return b.toString();
        }

        /** Splits SQL into words (db.name kept whole), string literals, and single symbols. */
        static List<Token> split(String sql) {
            List<Token> out = new ArrayList<>();
            int depth = 0;
            int i = 0;
            while (i < sql.length()) {
                char c = sql.charAt(i);
                if (Character.isWhitespace(c)) {
                    i++;
                } else if (c == '\'') {
                    int j = i + 1;
                    while (j < sql.length()) {
                        char d = sql.charAt(j);
                        if (d == '\\') {
                            j += 2;
                        } else if (d == '\'' && j + 1 < sql.length() && sql.charAt(j + 1) == '\'') {
                            j += 2;
                        } else if (d == '\'') {
                            break;
                        } else {
                            j++;
                        }
                    }
                    out.add(new Token(sql.substring(i, Math.min(j + 1, sql.length())), depth));
                    i = j + 1;
                } else if (c == '-' && sql.startsWith("--", i)) {
                    int nl = sql.indexOf('\n', i);
                    i = nl < 0 ? sql.length() : nl;
                } else if (Character.isLetterOrDigit(c) || c == '_' || c == '`') {
                    int j = i;
                    while (j < sql.length() && (Character.isLetterOrDigit(sql.charAt(j)) || "_`.".indexOf(sql.charAt(j)) >= 0)) {
                        j++;
                    }
                    out.add(new Token(sql.substring(i, j), depth));
                    i = j;
                } else {
                    if (c == ')') {
                        depth--;
                    }
                    String sym = sql.startsWith("==", i) || sql.startsWith("!=", i) || sql.startsWith("<>", i)
                            || sql.startsWith("<=", i) || sql.startsWith(">=", i) ? sql.substring(i, i + 2) : String.valueOf(c);
                    out.add(new Token(sym, depth));
                    if (c == '(') {
                        depth++;
                    }
                    i += sym.length();
                }
            }
            return out;
        }
    }
}

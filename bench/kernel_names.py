"""Short kernel names for tables, from the demangled names profilers report (no torch needed)."""


def _cut_trailing_group(text, opening, closing):
    """text less its last bracketed group when it ends with one: "f<int>(a, b)" -> "f<int>"."""
    if not text.endswith(closing):
        return text
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] == closing:
            depth += 1
        elif text[i] == opening:
            depth -= 1
            if depth == 0:
                return text[:i]
    return text


def short_name(kernel):
    """"void ignis::cuda::(anonymous namespace)::backward_staged<float, 4>(const float *, int)" -> "backward_staged".

    The parameter list and template arguments are cut as bracketed groups from the end, so commas
    and "::" inside them do not matter; a name without a scope ("Memcpy DtoD (Device -> Device)")
    keeps its words.
    """
    name = _cut_trailing_group(kernel.strip(), "(", ")").strip()
    name = _cut_trailing_group(name, "<", ">").strip()
    if "::" in name:
        return name.split("::")[-1] or kernel[:48]
    if name.startswith("void "):
        name = name[len("void "):]
    return name or kernel[:48]

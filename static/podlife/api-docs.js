// The offline API viewer: reads /api/v1/openapi.json (same origin) and lists every endpoint with its
// parameters and responses, and the schemas. Every text goes into the DOM as text (el()), never as HTML.
import { el, fetchJSON } from "./common.js";

const url = document.getElementById("api-docs-script").dataset.openapi;
const statusEl = document.getElementById("api-status");

function schemaText(schema, doc) {
  if (!schema) return "";
  if (schema.$ref) return schema.$ref.split("/").pop();
  if (schema.type === "array") return `array of ${schemaText(schema.items, doc) || "any"}`;
  if (schema.enum) return `${schema.type || ""} one of ${schema.enum.join(", ")}`.trim();
  if (schema.type === "object" && schema.properties) return `object {${Object.keys(schema.properties).join(", ")}}`;
  return [schema.type, schema.format].filter(Boolean).join(" ");
}

function resolve(response, doc) {
  if (!response.$ref) return response;
  return doc.components.responses[response.$ref.split("/").pop()] || response;
}

function endpoint(path, method, op, doc) {
  const id = `${method}-${path}`.replace(/[^A-Za-z0-9]+/g, "-");
  const section = el("section", { class: "api-endpoint", id },
    el("h3", {}, el("code", {}, `${method.toUpperCase()} ${doc.servers?.[0]?.url ?? ""}${path}`)),
    el("p", {}, op.summary || ""),
  );
  if (op.description) section.append(el("p", { class: "muted" }, op.description));
  const params = op.parameters || [];
  if (params.length) {
    const body = el("tbody");
    for (const p of params) {
      body.append(el("tr", {},
        el("td", {}, el("code", {}, p.name)), el("td", {}, p.in), el("td", {}, p.required ? "required" : ""),
        el("td", {}, schemaText(p.schema, doc)), el("td", {}, p.description || ""),
      ));
    }
    section.append(el("table", { class: "data" },
      el("thead", {}, el("tr", {}, ...["parameter", "in", "", "type", "meaning"].map((h) => el("th", {}, h)))), body));
  }
  const codes = el("ul");
  for (const [code, raw] of Object.entries(op.responses || {})) {
    const r = resolve(raw, doc);
    const schema = r.content?.["application/json"]?.schema;
    codes.append(el("li", {}, el("code", {}, code), ` ${r.description || ""}`, schema ? ` — ${schemaText(schema, doc)}` : ""));
  }
  section.append(codes);
  return [section, el("li", {}, el("a", { href: `#${id}` }, `${method.toUpperCase()} ${path}`))];
}

try {
  const doc = await fetchJSON(url);
  document.getElementById("api-intro").prepend(el("strong", {}, `${doc.info.title} v${doc.info.version}. `));
  const index = el("ul");
  const paths = document.getElementById("api-paths");
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const [section, link] = endpoint(path, method, op, doc);
      paths.append(section);
      index.append(link);
    }
  }
  document.getElementById("api-index").append(index);
  const schemas = document.getElementById("api-schemas");
  for (const [name, schema] of Object.entries(doc.components?.schemas || {})) {
    const props = el("ul");
    for (const [prop, s] of Object.entries(schema.properties || {})) {
      props.append(el("li", {}, el("code", {}, prop), ` ${schemaText(s, doc)}`, s.description ? ` — ${s.description}` : ""));
    }
    schemas.append(el("section", { class: "api-schema", id: `schema-${name}` }, el("h3", {}, name), props));
  }
  document.getElementById("schemas-title").hidden = false;
  statusEl.textContent = `${index.children.length} endpoints`;
  document.body.dataset.apiReady = "1";
} catch (err) {
  statusEl.textContent = `the OpenAPI document did not load: ${err.message}`;
}

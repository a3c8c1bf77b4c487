// Search in the page's language, and Chinese queries cut into the index's own words.
//
// 1. Each language has its own index (measure/site/hooks.py splits the one mkdocs-static-i18n merges): the default
//    language's at search/search_index.json, where Material's bundle asks for it, another language's under its
//    folder (en/search/search_index.json). The bundle asks with XMLHttpRequest; on a page of another language this
//    sends that request to the language's index, so a page loads its own language's index only.
// 2. jieba cut the Chinese text into words at build time (joined by U+200B, which the search separator splits on).
//    Material's worker cuts a Chinese query with a greedy scan over the index that never takes the whole run and
//    drops its tail (重定向 became 重* 定*: pages with any word starting with 重 or 定). So this script cuts each run of
//    Chinese characters itself, into words the index has (the longest first; the rest of the run whole when some
//    word starts with it, which the trailing * then finds), and writes each word with "\" between its characters:
//    lunr's query syntax reads 重\定\向 as the term 重定向, and Material's scan, which looks at runs of Chinese
//    characters only, leaves it alone. Words of two or more characters are required (+): the reader typed them
//    together. Single characters stay optional (a stop word such as 的 is not in the index).
//
// Material creates the worker and asks for the index while its bundle runs, so hooks.py puts this script right
// before the bundle (after the #__config script and the header it reads). tests/test_browser.py searches in both
// languages and checks which index each page loads, so a Material upgrade that changes any of this shows there.
(function () {
  "use strict";
  var config = document.getElementById("__config");
  var selector = document.querySelectorAll(".md-select__link[hreflang]");
  if (!config || typeof window.Worker !== "function") return;

  // The page's language: the first folder of its location when that names a language of the selector
  // (en/pooling/ → en), else the default language, whose pages sit at the top.
  var locales = Array.prototype.map.call(selector, function (a) { return a.getAttribute("hreflang"); });
  var base = new URL(JSON.parse(config.textContent).base, window.location.href);
  var here = decodeURI(window.location.pathname).slice(decodeURI(base.pathname).length);
  var first = here.replace(/^\/+/, "").split(/[/#?]/)[0];
  var language = locales.indexOf(first) >= 0 ? first : "";

  if (language) {
    var index = new URL("search/search_index.json", base).href;
    var own = new URL(language + "/search/search_index.json", base).href;
    var open = XMLHttpRequest.prototype.open;
    XMLHttpRequest.prototype.open = function (method, url) {
      var args = Array.prototype.slice.call(arguments);
      if (new URL(String(url), window.location.href).href === index) args[1] = own;
      return open.apply(this, args);
    };
  }

  var HAN = /\p{sc=Han}+/gu;
  var words = new Set();     // the Chinese words of the index
  var prefixes = new Set();  // and every start of one

  function learn(data) {
    var separator = new RegExp(data.config.separator, "g");
    data.docs.forEach(function (doc) {
      [doc.title, doc.text].forEach(function (field) {
        String(field || "").replace(/<[^>]*>/g, " ").split(separator).forEach(function (token) {
          (token.match(HAN) || []).forEach(function (word) {
            if (words.has(word)) return;
            words.add(word);
            var chars = Array.from(word);
            for (var i = 1; i <= chars.length; i++) prefixes.add(chars.slice(0, i).join(""));
          });
        });
      });
    });
  }

  function cut(run) {
    var chars = Array.from(run), out = [], i = 0;
    while (i < chars.length) {
      var rest = chars.slice(i).join("");
      if (prefixes.has(rest)) { out.push(rest); break; }
      var j = chars.length;
      while (j > i + 1 && !words.has(chars.slice(i, j).join(""))) j--;
      out.push(chars.slice(i, j).join(""));
      i = j;
    }
    return out;
  }

  // A flag, route or name with underscores, as measure/site/hooks.py OPERATOR finds them in the pages: typed with or
  // without its leading dashes, it becomes the joined token the index's "operators" field holds, required (+).
  var OPERATOR = /(^|\s)(--?[a-z0-9][a-z0-9-]*[a-z0-9]|\/[a-z][a-z0-9_]*(?:\/[a-z0-9_]+)*|[a-z0-9]+(?:[-_][a-z0-9]+)+)(?=\s|$)/gi;

  function operators(query) {
    return query.replace(OPERATOR, function (_, space, word) {
      return space + "+op" + word.toLowerCase().replace(/[^a-z0-9]/g, "") + "*";
    });
  }

  function rewrite(query) {
    query = operators(query);
    if (!words.size) return query;
    return query.replace(/([+-]?)(\p{sc=Han}+)\*?/gu, function (_, sign, run) {
      return " " + cut(run).map(function (word) {
        var chars = Array.from(word);
        return (sign === "-" ? "-" : chars.length > 1 ? "+" : "") + chars.join("\\") + "*";
      }).join(" ") + " ";
    }).trim();
  }

  var SETUP = 0, QUERY = 2;  // Material's SearchMessageType
  var NativeWorker = window.Worker;
  function SearchWorker(url, options) {
    var worker = new NativeWorker(url, options);
    var post = worker.postMessage;
    worker.postMessage = function (message) {
      var args = Array.prototype.slice.call(arguments);
      if (message && message.type === SETUP && message.data && Array.isArray(message.data.docs)) {
        learn(message.data);
      } else if (message && message.type === QUERY && typeof message.data === "string") {
        args[0] = Object.assign({}, message, {data: rewrite(message.data)});
      }
      return post.apply(worker, args);
    };
    return worker;
  }
  SearchWorker.prototype = NativeWorker.prototype;
  window.Worker = SearchWorker;
})();
